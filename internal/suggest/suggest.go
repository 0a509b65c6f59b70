// Package suggest finds the known name closest to a mistyped one, for
// "did you mean" hints in error messages.
package suggest

// Closest returns the candidate nearest to s by edit distance when it is
// near enough to be a typo (at most one edit per three bytes of s, and at
// least one allowed), or "".
func Closest(s string, candidates []string) string {
	best, bestD := "", max(1, len(s)/3)+1
	for _, c := range candidates {
		if d := distance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b, by bytes (names
// here are ASCII).
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
