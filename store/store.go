package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/conclave-agent/conclave/internal/atomicfile"
	"github.com/conclave-agent/conclave/internal/safefile"
	"github.com/conclave-agent/conclave/protocols"
)

const (
	// FileName is the name of the state file inside the data directory.
	FileName = "hardstate"
	// tmpPrefix starts the name of every temporary file Save creates, so
	// that Open can recognise and remove those a crash left behind.
	tmpPrefix = FileName + ".tmp-"
)

// ErrRegression is wrapped by the error Save returns for a state that goes
// back: a lower term or epoch, a changed vote within the same term, or an
// older voter configuration (a lower index, a lower version, or none).
var ErrRegression = errors.New("hard state would go back")

// Store persists one node's HardState in its data directory. Its methods
// may be called from several goroutines, but the agent's event loop is
// expected to be the only writer. Hold the directory's DirLock for as long
// as a Store is in use: two processes saving to one directory would undo
// each other's votes.
type Store struct {
	dir  string
	path string

	mu sync.Mutex
	// last is the state known to be on disk, set by a successful Load or
	// Save; nil until then. Save checks new states against it.
	last *protocols.HardState
	// observed is the observed epoch known to be on disk, once
	// observedLoaded (store/observed.go).
	observed       uint64
	observedLoaded bool
}

// Open prepares dir (created with mode 0700 if missing) for a Store and
// removes temporary files that a crash during Save may have left. It does
// not read the state file; call Load.
func Open(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("store: empty data directory path")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store: create data directory: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("store: read data directory: %w", err)
	}
	for _, e := range entries {
		// A temporary file never became the state: the rename that would
		// have published it did not happen, so it is safe to drop.
		if (strings.HasPrefix(e.Name(), tmpPrefix) || strings.HasPrefix(e.Name(), observedTmpPrefix)) && e.Type().IsRegular() {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("store: remove stale temporary file: %w", err)
			}
		}
	}
	return &Store{dir: dir, path: filepath.Join(dir, FileName)}, nil
}

// Path returns the path of the state file.
func (s *Store) Path() string { return s.path }

// Load reads the state file. A missing file yields the zero HardState and no
// error (a node that has never run); a file that cannot be trusted yields an
// error that names it and wraps ErrCorrupt.
func (s *Store) Load() (protocols.HardState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	hs, err := s.load()
	if err != nil {
		return protocols.HardState{}, err
	}
	s.last = &hs
	return hs, nil
}

func (s *Store) load() (protocols.HardState, error) {
	f, err := safefile.Open(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return protocols.HardState{}, nil
	}
	if err != nil {
		return protocols.HardState{}, fmt.Errorf("store: open state file: %w", err)
	}
	defer f.Close()
	// Read one byte more than a record so that an oversized file is told
	// apart from a valid one without reading (or allocating) all of it.
	b, err := io.ReadAll(io.LimitReader(f, MaxRecordSize+1))
	if err != nil {
		return protocols.HardState{}, fmt.Errorf("store: read state file %s: %w", s.path, err)
	}
	hs, err := Decode(b)
	if err != nil {
		if len(b) > MaxRecordSize {
			err = fmt.Errorf("%w: larger than %d bytes", ErrCorrupt, MaxRecordSize)
		}
		return protocols.HardState{}, fmt.Errorf("store: state file %s: %w (refusing to start from a reset state; restore it or, to start this node afresh, delete it)", s.path, err)
	}
	if err := protocols.CheckHardState(hs); err != nil {
		// No election can follow such a state without wrapping the
		// counter; it comes from a buggy build, a wrong backup or a
		// hostile member, never from this agent's own elections.
		return protocols.HardState{}, fmt.Errorf("store: state file %s: %w; no election can follow it without wrapping. "+
			"Start this node afresh by deleting the file (it then joins at the cluster's term), or restore a backup taken before the bad value; "+
			"if every member holds it, stop them all, delete every state file and reset the highest epoch your fenced resources keep", s.path, err)
	}
	return hs, nil
}

// Save makes hs durable before returning: temporary file, fsync, rename over
// the state file, fsync of the directory. It refuses (wrapping ErrRegression)
// a state whose term or epoch is lower than the one on disk, or whose vote
// differs from a vote already cast in the same term. When no Load or Save
// happened yet, Save first reads the file to check against it, so a corrupt
// file is never overwritten by accident.
func (s *Store) Save(hs protocols.HardState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		prev, err := s.load()
		if err != nil {
			return err
		}
		s.last = &prev
	}
	if err := protocols.CheckHardState(hs); err != nil {
		return fmt.Errorf("store: save %s: %w", s.path, err)
	}
	if err := checkForward(*s.last, hs); err != nil {
		return fmt.Errorf("store: save %s: %w", s.path, err)
	}
	if err := s.write(Encode(hs)); err != nil {
		return fmt.Errorf("store: save %s: %w", s.path, err)
	}
	s.last = &hs
	return nil
}

func checkForward(prev, next protocols.HardState) error {
	switch {
	case next.Term < prev.Term:
		return fmt.Errorf("%w: term %d < %d", ErrRegression, next.Term, prev.Term)
	case next.Epoch < prev.Epoch:
		return fmt.Errorf("%w: epoch %d < %d", ErrRegression, next.Epoch, prev.Epoch)
	case next.Term == prev.Term && prev.Vote != protocols.None && next.Vote != prev.Vote:
		return fmt.Errorf("%w: vote in term %d changed from %d to %d", ErrRegression, next.Term, prev.Vote, next.Vote)
	case !prev.Config.IsZero() && next.Config.IsZero():
		return fmt.Errorf("%w: configuration %v dropped", ErrRegression, prev.Config)
	case next.Config.Index < prev.Config.Index || next.Config.Compare(prev.Config) < 0:
		return fmt.Errorf("%w: configuration %v older than %v", ErrRegression, next.Config, prev.Config)
	}
	return nil
}

func (s *Store) write(b []byte) error {
	return atomicfile.WriteFile(s.path, b, tmpPrefix+"*")
}
