package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/conclave-agent/conclave/agent"
	"github.com/conclave-agent/conclave/config"
)

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("run", stderr)
	path := fs.String("config", "", "TOML configuration file (config.example.toml documents every key)")
	overrides := config.RegisterFlags(fs)
	words, code, ok := parseArgs(fs, args, stdout)
	if !ok {
		return code
	}
	if len(words) == 1 && *path == "" && strings.HasSuffix(words[0], ".toml") {
		fmt.Fprintf(stderr, "agent run: unexpected argument %q: pass the file with -config, as in: agent run -config %s\n", words[0], words[0])
		return 2
	}
	if !expectNoWords(fs, words) {
		return 2
	}
	cfg, err := overrides.Load(*path)
	if err != nil {
		if *path == "" {
			// Without -config only flags configure the agent, so every
			// required key is "missing": say what is really missing.
			fmt.Fprintf(stderr, "agent run: -config FILE is missing: there is no default configuration file.\n"+
				"  Start from the example, which documents every key: agent run -config config.example.toml\n"+
				"  (or set each key below with its flag, e.g. -node.name=n1)\n%v\n", err)
			return 2
		}
		fmt.Fprintf(stderr, "agent run: %v\n", err)
		return 2
	}
	lg, err := newLogger(cfg.Log, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "agent: %v\n", err)
		return 2
	}
	defer func() { _ = lg.Sync() }()

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	a, err := agent.New(ctx, cfg, agent.Options{Logger: lg})
	if err != nil {
		lg.Error("cannot start", zap.Error(err))
		return 1
	}
	// Type=notify: READY once the socket answers (see notify.go).
	defer notifySystemd(ctx, cfg.API.Socket, len(cfg.Gossip.Join) > 0, lg)()
	if err := a.Run(ctx); err != nil {
		lg.Error("stopped", zap.Error(err))
		return 1
	}
	lg.Info("stopped")
	return 0
}

// newLogger builds the zap logger [log] asks for, writing to w.
func newLogger(c config.Log, w io.Writer) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(c.Level)
	if err != nil {
		return nil, fmt.Errorf("log.level: %w", err)
	}
	ec := zap.NewProductionEncoderConfig()
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	var enc zapcore.Encoder
	if c.Format == config.FormatJSON {
		enc = zapcore.NewJSONEncoder(ec)
	} else {
		ec.EncodeLevel = zapcore.CapitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	}
	return zap.New(zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), level)), nil
}
