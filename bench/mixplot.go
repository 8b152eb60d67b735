package main

import (
	"fmt"
	"image/color"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// plotMixing is mixing against memory: the shuffle scenario's window lines.
const plotMixing = "mixing_vs_memory.png"

// LanceDB's permutation with clumps of 16 rows, as issue 16 measured it
// (the same figure on label-sorted data, on the 2-core machine):
// the peer the mixing target is set against.
const (
	lanceClump16Mixing  = 0.15
	lanceClump16RowsPer = 0.27e6
)

// mixingPlot draws, for each ShuffleWindow of the sweep, the mixing figure
// (lower mixes better) against the peak Go heap of the run, each point
// labelled with its window and rows/s; the targets (0.15 and 0.05) and
// LanceDB's clump-16 figure are lines across.
func mixingPlot(lines []*record) (*plot.Plot, vg.Length, vg.Length, error) {
	var xys plotter.XYs
	var labels []string
	for _, r := range lines {
		if !measured(r) || !strings.HasPrefix(r.str("scenario"), "table_window_") {
			continue
		}
		mix, ok1 := num(r.get("mixing"))
		heap, ok2 := num(r.get("peak_heap_bytes"))
		if !ok1 || !ok2 {
			continue
		}
		xys = append(xys, plotter.XY{X: heap / (1 << 20), Y: mix})
		labels = append(labels, fmt.Sprintf("window %s\n%s rows/s", strings.TrimPrefix(r.str("scenario"), "table_window_"), humanRate(r.float("rows_per_s"))))
	}
	if len(xys) == 0 {
		return nil, 0, 0, nil
	}
	p := newPlot("sluice shuffled: mixing against memory (ShuffleWindow sweep, label-sorted data, 131,072-row groups)", lines)
	p.X.Label.Text = "peak Go heap (MiB)"
	p.Y.Label.Text = "mixing: mean TVD of batch label histograms (lower is better)"
	p.Add(plotter.NewGrid())
	hi := 0.0
	for _, xy := range xys {
		hi = max(hi, xy.X)
	}
	across := func(y float64, c color.Color, dashed bool, name string) error {
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: y}, {X: hi * 1.25, Y: y}})
		if err != nil {
			return err
		}
		l.Color = c
		if dashed {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l)
		p.Legend.Add(name, l)
		return nil
	}
	if err := across(lanceClump16Mixing, readerColors["lancedb"], false, fmt.Sprintf("LanceDB clump 16: %.2f at %s rows/s (issue 16)", lanceClump16Mixing, humanRate(lanceClump16RowsPer))); err != nil {
		return nil, 0, 0, err
	}
	if err := across(0.05, color.Gray{Y: 0x80}, true, "0.05: the documented setting's target"); err != nil {
		return nil, 0, 0, err
	}
	line, points, err := plotter.NewLinePoints(xys)
	if err != nil {
		return nil, 0, 0, err
	}
	line.Color = readerColors["sluice"]
	points.Color = readerColors["sluice"]
	points.Shape = draw.CircleGlyph{}
	p.Add(line, points)
	p.Legend.Add("sluice, ShuffleWindow sweep", line, points)
	lb, err := pointLabels(xys, labels, 8, draw.XLeft, draw.YBottom, vg.Point{X: vg.Points(4), Y: vg.Points(3)})
	if err != nil {
		return nil, 0, 0, err
	}
	p.Add(lb)
	p.X.Min, p.X.Max = 0, hi*1.25
	p.Y.Min, p.Y.Max = 0, 1
	return p, vg.Points(640), vg.Points(420), nil
}
