// Package readme runs the commands of the repository's README.md as
// written, in order, and checks what they print: a README change that
// breaks a command fails CI.
//
// Every code block of the README (indented or fenced) carries a marker, an
// HTML comment on the line before it (a blank line between), that says
// how it runs:
//
//	<!-- readme-test: run [expect="RE"]… [retry=D] [timeout=D] -->
//	    the block is a bash script; it must exit 0, and its output must
//	    match every expect (with retry, it is run again until it does);
//	    its lines of the form NAME=VALUE or export NAME=VALUE are run
//	    again before every later block, as the reader's shell keeps them
//	<!-- readme-test: background name=N socket=PATH… [stdin] -->
//	    a long-running command (agent run, agent dev): started in the
//	    background, ready once every socket answers; with stdin, later
//	    "stdin N" blocks type into it
//	<!-- readme-test: stdin N expect="RE"… -->
//	    lines typed into background N, one at a time; after line i its
//	    output must match expect i (one expect per line)
//	<!-- readme-test: output N -->
//	    sample output of background N: each line, with times, node names
//	    and numbers as wildcards ("..." skipped), must appear in order
//	<!-- readme-test: stream [expect="RE"]… -->
//	    a command that streams until Ctrl-C (agent watch): run until its
//	    output matches, then interrupted
//	<!-- readme-test: skip reason="…" -->
//	    not run, for the reason given (the test logs it)
//
// and a marker with no block stops background commands where a reader
// would press Ctrl-C:
//
//	<!-- readme-test: stop N… -->
//
// Background commands must stop cleanly on Ctrl-C: exit 0, with no error
// in their output. A block without a marker fails the test.
//
// The commands run in a copy of the repository (git-tracked and untracked
// files alike, without .git, bin/ and data/), so the checkout is not
// touched. The one change to "as written": the fixed loopback ports of the
// README and config.example.toml (7946, 7947, …) are replaced, there and in
// the copy of the file, by free ones, so that the test cannot collide with
// other tests, or another agent, on the machine.
package readme
