package phi

import (
	"math"
	"testing"
)

// Reference values of -log10(P(Z > z)) for a standard normal Z, computed
// with mpmath at 40 digits (erfc(z/√2)/2). The large-z rows lie where
// float64 erfc underflows (z > 37.5): they check the asymptotic branch.
var tailPoints = []struct{ z, phi float64 }{
	{-8, 2.7017288495439212877e-16},
	{-3, 0.00058664931379006669102},
	{-1, 0.075026012957818023238},
	{0, 0.30102999566398119521},
	{1, 0.79954554149197050003},
	{2, 1.643016080140937048},
	{3, 2.8696990359293690772},
	{5, 6.5426456723906544963},
	{10, 23.118053405486075894},
	{20, 88.56009534307559192},
	{28.28, 175.5164406721792657},
	{30, 197.30920926166094939},
	{40, 349.43700645934584209},
	{100, 2173.8715428690343765},
	{1000, 217150.64004199438628},
	{1e6, 217147240958.02500376},
	{1e9, 217147240951625923.22},
}

func TestPhiOfZKnownPoints(t *testing.T) {
	for _, p := range tailPoints {
		got := phiOfZ(p.z)
		if rel := math.Abs(got-p.phi) / p.phi; rel > 1e-12 {
			t.Errorf("phiOfZ(%v) = %.17g, want %.17g (relative error %.2g)", p.z, got, p.phi, rel)
		}
	}
}

// Thresholds map to z-scores: a threshold of T suspects a peer once the
// silence is z(T) deviations past the mean. mpmath values.
func TestPhiOfZThresholdCrossings(t *testing.T) {
	for _, c := range []struct{ phi, z float64 }{
		{1, 1.28155156554}, {2, 2.32634787404}, {4, 3.71901648546},
		{8, 5.61200124417}, {10, 6.3613409024}, {12, 7.0344838253}, {16, 8.22208221613},
	} {
		below, above := phiOfZ(c.z-1e-9), phiOfZ(c.z+1e-9)
		if !(below < c.phi && above > c.phi) {
			t.Errorf("phi crosses %v at z=%v: phi(z-1e-9)=%v, phi(z+1e-9)=%v", c.phi, c.z, below, above)
		}
	}
}

func TestPhiOfZMonotoneAcrossBranches(t *testing.T) {
	// Fine steps through each place the formula changes: the sign of z
	// and the switch to the asymptotic series.
	for _, centre := range []float64{0, asymptoticFrom * math.Sqrt2} {
		prev := phiOfZ(centre - 1e-3)
		for i := -999; i <= 1000; i++ {
			z := centre + float64(i)*1e-6
			got := phiOfZ(z)
			if got < prev {
				t.Fatalf("phiOfZ decreases at z=%.9g: %.17g < %.17g", z, got, prev)
			}
			prev = got
		}
	}
	// Coarse sweep over the whole range, ulp-sized neighbours included.
	prev := 0.0
	for z := -50.0; z < 1e19; z += 0.01 + math.Abs(z)*0.001 {
		for _, zz := range []float64{math.Nextafter(z, math.Inf(-1)), z, math.Nextafter(z, math.Inf(1))} {
			got := phiOfZ(zz)
			if math.IsNaN(got) || math.IsInf(got, 0) || got < 0 {
				t.Fatalf("phiOfZ(%v) = %v", zz, got)
			}
			if got < prev {
				t.Fatalf("phiOfZ decreases at z=%.17g: %.17g < %.17g", zz, got, prev)
			}
			prev = got
		}
	}
}
