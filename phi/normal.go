package phi

import "math"

// asymptoticFrom is the x = z/√2 from which -log10 of the normal tail is
// taken from the asymptotic series of erfc rather than from math.Erfc. At 20
// the series' first omitted term is below 1e-16 relative, so both agree to
// rounding, and math.Erfc (about 5e-176 there) is still far from underflow,
// which starts near x = 26.5 and would otherwise saturate phi at +Inf.
const asymptoticFrom = 20.0

var (
	ln10      = math.Ln10
	halfLnPi  = 0.5 * math.Log(math.Pi)
	lnTwo     = math.Ln2
	invSqrtTw = 1 / math.Sqrt2
)

// phiOfZ returns -log10(P(Z > z)) for a standard normal Z: the phi of a
// silence z standard deviations past the expected arrival. It is finite,
// non-negative and non-decreasing for every finite z.
func phiOfZ(z float64) float64 {
	x := z * invSqrtTw
	switch {
	case x < 0:
		// P(Z > z) = 1 - q with q = P(Z < z) small: log1p keeps the
		// digits that 1-q would round away, so phi stays above zero
		// and keeps rising smoothly through the early part of a gap.
		q := 0.5 * math.Erfc(-x)
		return -math.Log1p(-q)/ln10 + 0 // + 0 turns -0 into 0
	case x < asymptoticFrom:
		return -math.Log10(0.5 * math.Erfc(x))
	default:
		return logTail(x) / ln10
	}
}

// logTail returns -ln(erfc(x)/2) for x >= asymptoticFrom from the
// asymptotic expansion erfc(x) = exp(-x²)/(x√π) · Σ (-1)^n (2n-1)!!/(2x²)^n.
// Only the logarithm is formed, so the result grows like x² without ever
// underflowing; for the largest z a Detector can produce (about 1e19) x² is
// 1e38, far from overflow.
func logTail(x float64) float64 {
	u := 1 / (2 * x * x)
	// Six terms: at x = 20 the seventh is 6e-17 of the sum.
	s := 1 - u*(1-3*u*(1-5*u*(1-7*u*(1-9*u*(1-11*u)))))
	return x*x + math.Log(x) + halfLnPi - math.Log(s) + lnTwo
}
