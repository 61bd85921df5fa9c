package bench

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"strings"
	"time"
)

// The soak's picture (bench/soak.svg): a line chart per figure over the
// run's time, written here as plain SVG (no plotting library).

// svgSeries is one line of a chart: its points (x in minutes; a NaN y is
// a gap).
type svgSeries struct {
	name, color string
	xs, ys      []float64
}

// svgBand is a shaded span of the x axis, named in the chart's legend.
type svgBand struct {
	name, color string
	from, to    float64
}

var nodeColors = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2"}

// SoakSVG draws run's samples: RSS, descriptors, goroutines and the
// bounded topics' log bytes per node, produce latency p50/p99/p99.9 and
// acknowledgements a second, each over the run's minutes; the warm-up
// and the two windows the flatness verdict compares are shaded.
func SoakSVG(run *SoakRun) []byte {
	const (
		width, panelW, panelH = 1000.0, 500.0, 250.0
		top                   = 56.0
		cols                  = 2
	)
	ids := soakNodeIDs(run.Samples)
	perNode := func(v func(SoakNode) float64) []svgSeries {
		var out []svgSeries
		for i, id := range ids {
			s := svgSeries{name: fmt.Sprintf("node %d", id), color: nodeColors[i%len(nodeColors)]}
			for _, smp := range run.Samples {
				n, ok := nodeIn(smp, id)
				y := math.NaN()
				if ok {
					y = v(n)
				}
				s.xs, s.ys = append(s.xs, smp.At.Minutes()), append(s.ys, y)
			}
			out = append(out, s)
		}
		return out
	}
	latency := func(name, color string, v func(SoakSample) time.Duration) svgSeries {
		s := svgSeries{name: name, color: color}
		for _, smp := range run.Samples {
			y := math.NaN()
			if smp.Acked > 0 {
				y = float64(v(smp)) / float64(time.Millisecond)
			}
			s.xs, s.ys = append(s.xs, smp.At.Minutes()), append(s.ys, y)
		}
		return s
	}
	rate := svgSeries{name: "acks/s", color: nodeColors[0]}
	for _, smp := range run.Samples {
		rate.xs = append(rate.xs, smp.At.Minutes())
		rate.ys = append(rate.ys, float64(smp.Acked)/max(run.Interval.Seconds(), 1e-9))
	}
	panels := []struct {
		title  string
		series []svgSeries
	}{
		{"RSS (MiB)", perNode(func(n SoakNode) float64 { return nonNegative(float64(n.RSS) / (1 << 20)) })},
		{"anonymous RSS (MiB)", perNode(func(n SoakNode) float64 { return nonNegative(float64(n.Anon) / (1 << 20)) })},
		{"Go runtime's memory not returned to the OS (MiB)", perNode(func(n SoakNode) float64 { return nonNegative(float64(n.GoHeld) / (1 << 20)) })},
		{"Go heap in use (MiB)", perNode(func(n SoakNode) float64 { return nonNegative(float64(n.Heap) / (1 << 20)) })},
		{"open descriptors", perNode(func(n SoakNode) float64 { return nonNegative(float64(n.FDs)) })},
		{"goroutines", perNode(func(n SoakNode) float64 { return nonNegative(float64(n.Goroutines)) })},
		{"bounded topics' log (MiB)", perNode(func(n SoakNode) float64 { return nonNegative(float64(n.TopicBytes) / (1 << 20)) })},
		{"produce latency, send to ack (ms)", []svgSeries{
			latency("p50", "#2ca02c", func(s SoakSample) time.Duration { return s.P50 }),
			latency("p99", "#ff7f0e", func(s SoakSample) time.Duration { return s.P99 }),
			latency("p99.9", "#d62728", func(s SoakSample) time.Duration { return s.P999 }),
		}},
		{"sends acknowledged a second", []svgSeries{rate}},
	}
	var bands []svgBand
	if f := run.Flatness; f.Warmup > 0 {
		bands = append(bands, svgBand{"warm-up", "#999999", 0, f.Warmup.Minutes()})
	}
	if f := run.Flatness; f.Window > 0 {
		bands = append(bands,
			svgBand{"first window", "#2ca02c", f.FirstFrom.Minutes(), f.FirstTo.Minutes()},
			svgBand{"last window", "#1f77b4", f.LastFrom.Minutes(), f.LastTo.Minutes()})
	}
	xmax := run.Duration.Minutes()
	for _, s := range run.Samples {
		xmax = max(xmax, s.At.Minutes())
	}
	rows := (len(panels) + cols - 1) / cols
	height := top + float64(rows)*panelH
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%.0f" height="%.0f" fill="white"/>`+"\n", width, height)
	title := fmt.Sprintf("Gregor soak: %d nodes, %s, sampled every %s (%s)", len(ids), run.Duration, run.Interval, run.Started.UTC().Format("2006-01-02 15:04 UTC"))
	if run.Duration < SoakFullDuration {
		title += ": a trial"
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="22" font-size="15" text-anchor="middle">%s</text>`+"\n", width/2, html.EscapeString(title))
	// The shaded spans, named once for every panel.
	total := 0.0
	for _, bd := range bands {
		total += 6*float64(len(bd.name)) + 40
	}
	lx := (width - total) / 2
	for _, bd := range bands {
		fmt.Fprintf(&b, `<rect x="%.1f" y="34" width="16" height="10" fill="%s" fill-opacity="0.25"/>`, lx, bd.color)
		fmt.Fprintf(&b, `<text x="%.1f" y="43">%s</text>`+"\n", lx+20, html.EscapeString(bd.name))
		lx += 6*float64(len(bd.name)) + 40
	}
	for i, p := range panels {
		x0 := float64(i%cols) * panelW
		y0 := top + float64(i/cols)*panelH
		chart(&b, x0, y0, panelW, panelH, p.title, xmax, p.series, bands)
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// chart draws one panel at (x0, y0) of size w x h: axes from 0, a grid,
// the bands, the lines (with a dot at each point of a short run) and a
// legend.
func chart(b *bytes.Buffer, x0, y0, w, h float64, title string, xmax float64, series []svgSeries, bands []svgBand) {
	const left, right, top, bottom = 60.0, 15.0, 28.0, 42.0
	px, py := x0+left, y0+top
	pw, ph := w-left-right, h-top-bottom
	ymax := 0.0
	points := 0
	for _, s := range series {
		for _, y := range s.ys {
			if !math.IsNaN(y) {
				ymax = max(ymax, y)
			}
		}
		points = max(points, len(s.ys))
	}
	ystep := niceStep(ymax / 5)
	ytop := math.Max(ystep, math.Ceil(ymax*1.05/ystep)*ystep) // a line at the maximum stays off the frame
	if xmax <= 0 {
		xmax = 1
	}
	xstep := niceStep(xmax / 8)
	sx := func(x float64) float64 { return px + x/xmax*pw }
	sy := func(y float64) float64 { return py + ph - y/ytop*ph }

	fmt.Fprintf(b, `<g><text x="%.1f" y="%.1f" font-size="13" font-weight="bold">%s</text>`+"\n", px, y0+18, html.EscapeString(title))
	for _, bd := range bands {
		from, to := math.Max(0, bd.from), math.Min(xmax, bd.to)
		if to < from {
			continue
		}
		wid := math.Max(sx(to)-sx(from), 2)
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" fill-opacity="0.12"/>`+"\n", sx(from), py, wid, ph, bd.color)
	}
	for y := 0.0; y <= ytop+ystep/2; y += ystep {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#dddddd"/>`, px, sy(y), px+pw, sy(y))
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", px-5, sy(y)+4, tick(y, ystep))
	}
	for x := 0.0; x <= xmax+xstep/100; x += xstep {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eeeeee"/>`, sx(x), py, sx(x), py+ph)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", sx(x), py+ph+14, tick(x, xstep))
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555555">minutes</text>`+"\n", px+pw/2, py+ph+28)
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888888"/>`+"\n", px, py, pw, ph)
	for _, s := range series {
		var run []string
		flush := func() {
			if len(run) > 1 {
				fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.6" points="%s"/>`+"\n", s.color, strings.Join(run, " "))
			}
			run = run[:0]
		}
		for i, y := range s.ys {
			if math.IsNaN(y) {
				flush()
				continue
			}
			run = append(run, fmt.Sprintf("%.1f,%.1f", sx(s.xs[i]), sy(y)))
			if points <= 30 {
				fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="2.2" fill="%s"/>`, sx(s.xs[i]), sy(y), s.color)
			}
		}
		flush()
		b.WriteString("\n")
	}
	// The lines' legend, right-aligned in the title's line.
	lx := px + pw
	for i := len(series) - 1; i >= 0; i-- {
		s := series[i]
		lx -= 6*float64(len(s.name)) + 26
		ly := y0 + 14
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2.5"/>`, lx, ly, lx+14, ly, s.color)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", lx+18, ly+4, html.EscapeString(s.name))
	}
	b.WriteString("</g>\n")
}

// niceStep is the step of 1, 2, 2.5 or 5 times a power of ten nearest
// above raw (1 for nothing to show).
func niceStep(raw float64) float64 {
	if raw <= 0 || math.IsNaN(raw) || math.IsInf(raw, 0) {
		return 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if raw <= m*mag {
			return m * mag
		}
	}
	return 10 * mag
}

// tick writes a tick's value with as many decimals as its step needs.
func tick(v, step float64) string {
	switch {
	case step >= 1 && step == math.Trunc(step):
		return fmt.Sprintf("%.0f", v)
	case step >= 0.1:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2g", v)
}
