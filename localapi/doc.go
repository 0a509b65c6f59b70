// Package localapi serves the agent's socket API (docs/design.md §6): HTTP/1.1 and
// JSON on a Unix socket, for local processes and the agent CLI.
//
// The server sits behind the narrow Backend interface, which the agent
// implements; watch streams and blocking leader queries are fed by a Hub
// that the agent's event loop publishes to. Wire types and paths come from
// package api, shared with the Go client.
//
// One agent may run several named elections. Each election's endpoints
// answer under /v1/elections/NAME/ as well as, for the election "default",
// unprefixed; the server puts NAME in the request's context
// (ElectionFrom) and the Backend answers for it, and the Hub keeps one
// stream per election.
//
// This package must never import the agent or the protocols, never mutate
// election state (it only asks the Backend), and must never let a slow or
// hostile client block the agent: Hub.Publish does not block, a watcher
// that lags is closed, and every request is bounded in size and time.
package localapi
