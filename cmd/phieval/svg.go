package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"time"
)

// point is one detector setting in one scenario.
type point struct {
	x, y  float64 // mean detection in ms, false suspicions per day
	label string
}

// series is one curve: a detector family across its settings.
type series struct {
	name   string
	points []point
}

// panel is one scenario's plot.
type panel struct {
	title  string
	series []series
}

func newPanel(title string, res []result, length time.Duration) panel {
	p := panel{title: title}
	index := map[string]int{}
	for _, r := range res {
		i, ok := index[r.cand.family]
		if !ok {
			i = len(p.series)
			index[r.cand.family] = i
			p.series = append(p.series, series{name: r.cand.family})
		}
		p.series[i].points = append(p.series[i].points, point{
			x:     float64(r.meanDetection()) / float64(time.Millisecond),
			y:     perDay(r.falses, length),
			label: r.cand.label,
		})
	}
	return p
}

var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"}

// Panel geometry, in SVG user units.
const (
	panelW, panelH = 420.0, 330.0
	marginL        = 60.0
	marginR        = 15.0
	marginT        = 40.0
	marginB        = 45.0
	headerH        = 50.0
	legendH        = 30.0
)

// writeSVG renders the panels side by side: x is the mean time from crash
// to suspicion (linear), y the false suspicions per day (log), with a row
// at the bottom for settings that never suspected a live sender.
func writeSVG(w io.Writer, panels []panel, title string) {
	// Shared axes, so the panels compare at a glance.
	xmax, ymin, ymax := 0.0, math.Inf(1), 0.0
	for _, p := range panels {
		for _, s := range p.series {
			for _, pt := range s.points {
				xmax = math.Max(xmax, pt.x)
				if pt.y > 0 {
					ymin, ymax = math.Min(ymin, pt.y), math.Max(ymax, pt.y)
				}
			}
		}
	}
	xmax = math.Ceil(xmax/250) * 250
	if math.IsInf(ymin, 1) {
		ymin, ymax = 1, 10
	}
	lo, hi := math.Floor(math.Log10(ymin)), math.Ceil(math.Log10(ymax))
	if hi <= lo {
		hi = lo + 1
	}
	plotW, plotH := panelW-marginL-marginR, panelH-marginT-marginB
	// The "never" row sits zeroBand below the lowest decade and
	// zeroInset above the frame, so labels under its points stay inside.
	const zeroBand, zeroInset = 22.0, 12.0
	xOf := func(x float64) float64 { return marginL + x/xmax*plotW }
	yOf := func(y float64) float64 {
		if y <= 0 {
			return marginT + plotH - zeroInset
		}
		return marginT + (plotH-zeroBand-zeroInset)*(hi-math.Log10(y))/(hi-lo)
	}

	width := panelW * float64(len(panels))
	height := headerH + panelH + legendH
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(w, `<text x="%g" y="20" text-anchor="middle" font-size="14" font-weight="bold">%s</text>`+"\n", width/2, html.EscapeString(title))
	for i, p := range panels {
		fmt.Fprintf(w, `<g transform="translate(%g,%g)">`+"\n", float64(i)*panelW, headerH)
		fmt.Fprintf(w, `<text x="%g" y="%g" text-anchor="middle" font-size="10.5">%s</text>`+"\n", panelW/2, marginT-22, html.EscapeString(shorten(p.title, 70)))
		// Grid and axes.
		for d := lo; d <= hi; d++ {
			y := yOf(math.Pow(10, d))
			fmt.Fprintf(w, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#ddd"/>`+"\n", marginL, y, marginL+plotW, y)
			fmt.Fprintf(w, `<text x="%g" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", marginL-4, y, decade(d))
		}
		fmt.Fprintf(w, `<text x="%g" y="%.1f" text-anchor="end" dominant-baseline="middle">0</text>`+"\n", marginL-4, yOf(0))
		fmt.Fprintf(w, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#ddd" stroke-dasharray="3,3"/>`+"\n", marginL, yOf(0), marginL+plotW, yOf(0))
		for x := 0.0; x <= xmax; x += 250 {
			fmt.Fprintf(w, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#eee"/>`+"\n", xOf(x), marginT, xOf(x), marginT+plotH)
			fmt.Fprintf(w, `<text x="%.1f" y="%g" text-anchor="middle">%g</text>`+"\n", xOf(x), marginT+plotH+14, x)
		}
		fmt.Fprintf(w, `<rect x="%g" y="%g" width="%g" height="%g" fill="none" stroke="#444"/>`+"\n", marginL, marginT, plotW, plotH)
		fmt.Fprintf(w, `<text x="%g" y="%g" text-anchor="middle">mean detection time of a crash (ms)</text>`+"\n", marginL+plotW/2, marginT+plotH+32)
		fmt.Fprintf(w, `<text transform="translate(14,%g) rotate(-90)" text-anchor="middle">false suspicions per day</text>`+"\n", marginT+plotH/2)
		// Curves.
		for si, s := range p.series {
			col := palette[si%len(palette)]
			fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="`, col)
			for _, pt := range s.points {
				fmt.Fprintf(w, "%.1f,%.1f ", xOf(pt.x), yOf(pt.y))
			}
			fmt.Fprintln(w, `"/>`)
			for j, pt := range s.points {
				// Neighbouring points often sit close together (all
				// of a family's zero-rate settings share the bottom
				// row): alternate labels above and below.
				dy := -4.0
				if j%2 == 1 {
					dy = 11
				}
				fmt.Fprintf(w, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`, xOf(pt.x), yOf(pt.y), col)
				fmt.Fprintf(w, `<text x="%.1f" y="%.1f" font-size="9" fill="%s">%s</text>`+"\n", xOf(pt.x)+3, yOf(pt.y)+dy, col, html.EscapeString(pt.label))
			}
		}
		fmt.Fprintln(w, "</g>")
	}
	// Legend.
	if len(panels) > 0 {
		x := 20.0
		y := headerH + panelH + 15
		for si, s := range panels[0].series {
			col := palette[si%len(palette)]
			fmt.Fprintf(w, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="%s" stroke-width="2"/><text x="%g" y="%g" dominant-baseline="middle">%s</text>`+"\n",
				x, y, x+20, y, col, x+25, y, html.EscapeString(s.name+labelsNote(s.name)))
			x += 330
		}
	}
	fmt.Fprintln(w, "</svg>")
}

func labelsNote(family string) string {
	if family == familyFixed {
		return " (labels: timeout)"
	}
	return " (labels: threshold)"
}

func decade(d float64) string {
	v := math.Pow(10, d)
	if d >= 0 {
		return fmt.Sprintf("%g", v)
	}
	return fmt.Sprintf("%.*f", int(-d), v)
}

func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
