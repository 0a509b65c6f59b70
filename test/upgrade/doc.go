// Package upgrade holds the rolling-upgrade test: it builds the previous
// release's agent from the repository's own history (git archive of the
// release's commit, then go build) beside the tree's agent, and upgrades a
// cluster of five real agent processes on loopback one agent at a time,
// for each protocol without a cluster key and for majority with one,
// killing the leader at every step; then it rolls one agent back to the
// release. Throughout, every agent's watch stream is
// recorded and checked: at most one leader per epoch, epochs never go back
// at any agent (across restarts and binaries), and after every step all
// agents agree on one leader within a bound.
//
// The package has no non-test code; run it with
//
//	go test -race -v ./test/upgrade/
//
// The releases it knows are listed in releases_test.go; the test upgrades
// from the newest. In a clone that lacks the release's commit (a shallow
// clone) it skips and names the commit. docs/compatibility.md says what
// the test proves.
package upgrade
