package main

import (
	"fmt"
	"html"
	"math"
	"os"
	"strings"
	"time"
)

// svgSeries is one row of a strip chart.
type svgSeries struct {
	label   string
	samples []time.Duration
	color   string
}

// writeFailoverSVG draws every failover series (conclave and etcd) as a
// row of dots on a shared logarithmic time axis, with the median marked.
func writeFailoverSVG(path string, res *results) error {
	colors := map[string]string{"majority": "#1f77b4", "bully": "#2ca02c", "ring": "#9467bd"}
	var rows []svgSeries
	for _, f := range res.Failover {
		rows = append(rows, svgSeries{label: fmt.Sprintf("%s %s, %d agents", f.Protocol, f.Profile, f.N), samples: f.Samples, color: colors[f.Protocol]})
	}
	for _, e := range res.Etcd {
		rows = append(rows, svgSeries{label: e.Label, samples: e.Samples, color: "#d62728"})
	}
	return os.WriteFile(path, []byte(stripChart("Failover after SIGKILL of the leader (each dot one trial, bar the median)", rows)), 0o644)
}

// stripChart renders rows on a log10 axis spanning the samples.
func stripChart(title string, rows []svgSeries) string {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		for _, d := range r.samples {
			v := float64(d) / float64(time.Millisecond)
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 10, 1000
	}
	lo = math.Pow(10, math.Floor(math.Log10(math.Max(lo, 0.1))))
	hi = math.Pow(10, math.Ceil(math.Log10(math.Max(hi, lo*10))))
	const left, right, top, rowH = 330, 30, 40, 22
	width := 980
	plotW := float64(width - left - right)
	height := top + rowH*len(rows) + 50
	x := func(v float64) float64 {
		return float64(left) + plotW*(math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="14" font-weight="bold">%s</text>`+"\n", left-320, html.EscapeString(title))
	axisY := top + rowH*len(rows) + 5
	for dec := lo; dec <= hi*1.0001; dec *= 10 {
		for _, mult := range []float64{1, 2, 5} {
			v := dec * mult
			if v > hi*1.0001 {
				break
			}
			xx := x(v)
			stroke := "#eee"
			if mult == 1 {
				stroke = "#ccc"
			}
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", xx, top-5, xx, axisY, stroke)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", xx, axisY+16, axisLabel(v))
		}
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">time from kill to agreement (log scale)</text>`+"\n", float64(left)+plotW/2, axisY+36)
	for i, r := range rows {
		y := top + rowH*i + rowH/2
		color := r.color
		if color == "" {
			color = "#555"
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", left-10, y, html.EscapeString(r.label))
		for _, d := range r.samples {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%d" r="3.5" fill="%s" fill-opacity="0.45"/>`+"\n", x(float64(d)/float64(time.Millisecond)), y, color)
		}
		if len(r.samples) > 0 {
			m := x(float64(summarize(r.samples).Median) / float64(time.Millisecond))
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black" stroke-width="2"/>`+"\n", m, y-8, m, y+8)
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// axisLabel prints an axis value given in milliseconds.
func axisLabel(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%gs", v/1000)
	}
	return fmt.Sprintf("%gms", v)
}
