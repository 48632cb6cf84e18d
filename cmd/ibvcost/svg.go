package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"
)

// The chart: one horizontal bar per row and tool (the median), a whisker to
// the p99, all on one logarithmic time axis, slow path above fast path.
// Hand-written SVG; no dependency.
const (
	svgWidth  = 1000
	svgLabelW = 250 // row names
	svgRightW = 90  // room for the value after the longest bar
	svgBarH   = 11
	svgGap    = 7
	svgTop    = 78
)

var svgColors = []string{"#3b6ea8", "#e07b28"} // goverbs, rdma-core

// esc escapes text for XML.
func esc(s string) string {
	var b bytes.Buffer
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// axisLabel names a power of ten of nanoseconds: "100ns", "1µs", "10ms".
func axisLabel(p int) string {
	units := []string{"ns", "µs", "ms", "s"}
	u := min(p/3, len(units)-1)
	v := math.Pow(10, float64(p-3*u))
	return fmt.Sprintf("%g%s", v, units[u])
}

// writeSVG draws the reports (goverbs first; rdma-core, if given, beside it).
func writeSVG(w io.Writer, reps ...*Report) error {
	g := reps[0]
	// The axis spans the decades from the smallest median to the largest p99.
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range reps {
		for _, row := range r.Rows {
			if row.Skipped != "" {
				continue
			}
			lo = math.Min(lo, float64(max(row.MedianNS, 1)))
			hi = math.Max(hi, float64(max(row.P99NS, row.MedianNS, 1)))
		}
	}
	if math.IsInf(lo, 0) {
		lo, hi = 1, 10
	}
	dlo, dhi := int(math.Floor(math.Log10(lo))), int(math.Ceil(math.Log10(hi)))
	if dhi <= dlo {
		dhi = dlo + 1
	}
	x0, x1 := float64(svgLabelW), float64(svgWidth-svgRightW)
	xOf := func(ns int64) float64 {
		v := math.Log10(float64(max(ns, 1)))
		return x0 + (v-float64(dlo))/float64(dhi-dlo)*(x1-x0)
	}
	rowH := len(reps)*svgBarH + svgGap

	var body strings.Builder
	y := svgTop
	path := ""
	for _, gr := range g.Rows {
		if gr.Path != path {
			path = gr.Path
			y += 6
			fmt.Fprintf(&body, `<text x="8" y="%d" class="sec">%s path</text>`+"\n", y+10, esc(path))
			fmt.Fprintf(&body, `<line x1="8" y1="%d" x2="%d" y2="%d" class="sep"/>`+"\n", y+14, svgWidth-8, y+14)
			y += 20
		}
		fmt.Fprintf(&body, `<text x="%d" y="%d" class="name">%s</text>`+"\n", svgLabelW-8, y+len(reps)*svgBarH/2+4, esc(gr.Name))
		for i, r := range reps {
			row := r.row(gr.Name)
			by := y + i*svgBarH
			if row == nil || row.Skipped != "" {
				why := "skipped"
				if row != nil {
					why = "skipped: " + row.Skipped
				}
				if len(why) > 90 {
					why = why[:87] + "…"
				}
				fmt.Fprintf(&body, `<text x="%.1f" y="%d" class="skip">%s %s</text>`+"\n", x0+4, by+svgBarH-2, esc(r.Tool), esc(why))
				continue
			}
			xm, xp := xOf(row.MedianNS), xOf(max(row.P99NS, row.MedianNS))
			fmt.Fprintf(&body, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s %s: median %s, p99 %s</title></rect>`+"\n",
				x0, by+1, xm-x0, svgBarH-2, svgColors[i%len(svgColors)], esc(r.Tool), esc(row.Name), fmtNS(float64(row.MedianNS)), fmtNS(float64(row.P99NS)))
			if xp > xm+0.5 {
				cy := float64(by) + float64(svgBarH)/2
				fmt.Fprintf(&body, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="wh"/><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="wh"/>`+"\n",
					xm, cy, xp, cy, xp, cy-3, xp, cy+3)
			}
			val := fmtNS(float64(row.MedianNS))
			if row.Spread > unstable {
				val = "~" + val // the runs disagree (see Row.Spread)
			}
			fmt.Fprintf(&body, `<text x="%.1f" y="%d" class="val">%s</text>`+"\n", xp+4, by+svgBarH-2, val)
		}
		y += rowH
	}
	height := y + 40

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">`+"\n",
		svgWidth, height, svgWidth, height)
	b.WriteString(`<style>
.title{font-size:15px;font-weight:bold}.sub{font-size:11px;fill:#444}.sec{font-size:12px;font-weight:bold}
.name{font-size:11px;text-anchor:end}.val{font-size:9px;fill:#333}.skip{font-size:9px;fill:#999;font-style:italic}
.grid{stroke:#ddd;stroke-width:1}.sep{stroke:#bbb;stroke-width:0.5}.wh{stroke:#222;stroke-width:1}
.ax{font-size:10px;text-anchor:middle;fill:#444}
</style>
<rect width="100%" height="100%" fill="white"/>
`)
	title := "goverbs: cost per call, slow path and fast path"
	if len(reps) > 1 {
		title = "goverbs beside rdma-core: cost per call, slow path and fast path"
	}
	fmt.Fprintf(&b, `<text x="8" y="20" class="title">%s</text>`+"\n", esc(title))
	runs := ""
	if g.Runs > 1 {
		runs = fmt.Sprintf(" × %d runs (~: the runs disagree)", g.Runs)
	}
	sub := fmt.Sprintf("%s (%s), Linux %s; bar: median, whisker: p99; log scale; %d calls a row%s; timer floor %s subtracted",
		g.Device, g.Driver, g.Kernel, g.N, runs, fmtNS(float64(g.FloorNS)))
	fmt.Fprintf(&b, `<text x="8" y="37" class="sub">%s</text>`+"\n", esc(sub))
	if g.CPU != "" {
		fmt.Fprintf(&b, `<text x="8" y="51" class="sub">%s</text>`+"\n",
			esc(fmt.Sprintf("%s, clocksource %s: under emulation only ratios within one run mean anything", g.CPU, g.Clocksource)))
	}
	// Legend.
	for i, r := range reps {
		lx := svgWidth - 250 + i*120
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="10" fill="%s"/><text x="%d" y="%d" class="sub">%s</text>`+"\n",
			lx, 8, svgColors[i%len(svgColors)], lx+16, 17, esc(r.Tool))
	}
	// Axis: a grid line per decade, labels above and below.
	for p := dlo; p <= dhi; p++ {
		x := x0 + float64(p-dlo)/float64(dhi-dlo)*(x1-x0)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" class="grid"/>`+"\n", x, svgTop-6, x, height-30)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="ax">%s</text><text x="%.1f" y="%d" class="ax">%s</text>`+"\n",
			x, svgTop-10, axisLabel(p), x, height-18, axisLabel(p))
	}
	b.WriteString(body.String())
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
