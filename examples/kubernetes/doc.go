// Package kubernetes tests the Kubernetes example in contrib/kubernetes/:
// it decodes the manifests with the Kubernetes API types (strictly, so a
// misspelt field fails) and checks that the ports, paths and keys they
// use are the ones the agent's config gives, by running the container's
// own command line through the agent's flag set and config loader. The
// API types live in this module, not the agent's.
package kubernetes
