// Package multihost runs real agent processes as separate "hosts": one
// Linux network namespace each, with its own loopback and a 192.168.77.x
// address on a bridge, the same ports on every host (gossip 7946, libp2p
// 7947), wildcard binds, the shipped defaults and no advertise keys — the
// way an operator deploys one config file per machine on a LAN.
//
// The tests need root and the ip tool (iproute2); without them they skip
// and say why. The measurement behind docs/multihost.md runs with
// CONCLAVE_MULTIHOST_MEASURE=1 (see measure_test.go).
package multihost
