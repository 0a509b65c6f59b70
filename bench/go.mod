module github.com/conclave-agent/conclave/bench

go 1.26.0
