package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/conclave-agent/conclave/internal/suggest"
)

// MaxFileBytes bounds the configuration file. A real file is a few KiB; the
// bound keeps a wrong path (a log, a device) from being read into memory.
const MaxFileBytes = 1 << 20

// UnknownKeysError reports keys in a file that no setting has. Strictness
// turns a typo ("electon_timeout") into an error instead of a silently
// ignored setting.
type UnknownKeysError struct {
	// File is the configuration file's path as given.
	File string
	// Keys are the unknown keys, dotted ("election.electon_timeout"), in
	// file order.
	Keys []string
}

func (e *UnknownKeysError) Error() string {
	var s string
	if len(e.Keys) == 1 {
		s = fmt.Sprintf("config %s: unknown key %q", e.File, e.Keys[0])
	} else {
		s = fmt.Sprintf("config %s: unknown keys %s", e.File, quoteAll(e.Keys))
	}
	var hints []string
	for _, k := range e.Keys {
		if near := suggest.Closest(k, knownKeys); near != "" {
			hints = append(hints, fmt.Sprintf("%q for %q", near, k))
		}
	}
	if len(hints) > 0 {
		s += "; did you mean " + strings.Join(hints, ", ") + "?"
	}
	return s + " (config.example.toml lists every key)"
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// Load builds a Config in layers: Default, then the TOML file at path (when
// path is not empty), then each override in order (typically
// (*Flags).Apply), then derived defaults (api.socket = data_dir/agent.sock
// when unset). It returns the result of Validate on the final Config; on a
// validation error the Config is returned too, for diagnostics.
func Load(path string, overrides ...func(*Config)) (Config, error) {
	return load(path, nil, overrides...)
}

// load is Load; flags, when not nil, are the command-line flags among the
// overrides, which a problem with a value they gave is blamed on.
func load(path string, flags *Flags, overrides ...func(*Config)) (Config, error) {
	c := Default()
	var data string
	if path != "" {
		var err error
		if data, err = c.decodeFile(path); err != nil {
			return Config{}, err
		}
	}
	for _, o := range overrides {
		o(&c)
	}
	c.derive()
	if err := c.Validate(); err != nil {
		var ve *ValidationError
		if errors.As(err, &ve) {
			locate(ve, path, data, flags)
			if ve.onlyFlags() {
				return c, err // the file is not to blame: do not name it
			}
		}
		if path != "" {
			return c, fmt.Errorf("config %s: %w", path, err)
		}
		return c, fmt.Errorf("config: %w", err)
	}
	return c, nil
}

// Decode reads TOML from r (named name in errors) on top of c, strictly:
// unknown keys are an *UnknownKeysError. It neither derives nor validates.
func (c *Config) Decode(name string, r io.Reader) error {
	_, err := c.decode(name, r)
	return err
}

// decode is Decode that also returns the text it read, for messages that
// point at a line.
func (c *Config) decode(name string, r io.Reader) (string, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("config %s: read: %w", name, err)
	}
	if len(data) > MaxFileBytes {
		return "", fmt.Errorf("config %s: larger than %d bytes", name, MaxFileBytes)
	}
	// Decode into a copy so a half-decoded file never leaks into c.
	next := *c
	next.Gossip.Join = append([]string(nil), c.Gossip.Join...)
	next.Election.Voters = append([]string(nil), c.Election.Voters...)
	md, err := toml.Decode(string(data), &next)
	if err != nil {
		return "", parseError(name, string(data), err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		return "", &UnknownKeysError{File: name, Keys: unknownKeys(und)}
	}
	if md.IsDefined("node", "id") {
		// BurntSushi/toml converts a negative TOML integer into a uint64
		// field by wrapping it (-3 becomes 2^64-3), which would pass as
		// "out of range" with a baffling number. Read the key again,
		// signed, to say what was written.
		var signed struct {
			Node struct {
				ID int64 `toml:"id"`
			} `toml:"node"`
		}
		if _, err := toml.Decode(string(data), &signed); err == nil && signed.Node.ID < 0 {
			return "", fmt.Errorf("config %s, line %d: node.id: %d is negative; write a number 1 … %d", name, lineOf(string(data), "node.id"), signed.Node.ID, MaxNodeID)
		}
	}
	*c = next
	return string(data), nil
}

// unknownKeys renders undecoded keys, leaving out the keys inside an
// unknown table: "[foo] bar = 1" is one mistake, reported as "foo".
func unknownKeys(und []toml.Key) []string {
	var keys []string
	var tables []string
	for _, k := range und {
		s := k.String()
		inside := false
		for _, t := range tables {
			if strings.HasPrefix(s, t+".") {
				inside = true
				break
			}
		}
		if !inside {
			keys = append(keys, s)
			tables = append(tables, s)
		}
	}
	return keys
}

func (c *Config) decodeFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && !filepath.IsAbs(path) {
			wd, _ := os.Getwd()
			return "", fmt.Errorf("config: %w (relative to the working directory %s; config.example.toml at the repository's root documents every key)", err, wd)
		}
		return "", fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("config: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("config %s: not a regular file", path)
	}
	return c.decode(path, f)
}

// derive fills defaults that depend on other keys.
func (c *Config) derive() {
	if c.API.Socket == "" && c.Node.DataDir != "" {
		c.API.Socket = filepath.Join(c.Node.DataDir, "agent.sock")
	}
}
