// Package config loads the agent's configuration: built-in defaults, then a
// strict TOML file, then command-line flags, and one Validate that reports
// every problem at once, each with its key.
//
// The key names are a user-facing contract (docs/design.md §6); they are the TOML
// keys of the Config structs and, prefixed with their table, the flag names
// ("-election.protocol").
//
// This package only reads and checks configuration. It must never open
// sockets, create directories or files, start goroutines, or import the
// agent, the protocols or any network library (it imports phi, a pure
// library, for the detector's defaults and bounds): the agent acts on a Config
// after it has been validated, so a bad file fails before anything happens.
//
// Relative paths (node.data_dir, api.socket) are kept as written and are
// therefore relative to the agent's working directory, not to the
// configuration file — the same rule a shell user expects from
// "agent run -config etc/n1.toml" run from the repository root.
package config
