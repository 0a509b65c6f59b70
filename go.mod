module github.com/conclave-agent/conclave

go 1.26
