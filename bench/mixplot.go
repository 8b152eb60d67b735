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

// The mixing plots draw the mixcost scenario's sweep: one curve for each
// way of buying mixing (a larger window, more passes, both) on each data
// set, as mixing against peak heap and against rows/s.
const (
	plotMixing      = "mixing_vs_memory.png"
	plotMixingSpeed = "mixing_vs_rows_per_s.png"
)

// LanceDB's permutation with clumps of 16 rows, as issue 16 measured it
// (the same figure on label-sorted data, on the 2-core machine):
// the peer the mixing target is set against. A run whose peers line
// lancedb_shuffled_clump16 measured it draws that instead.
const (
	lanceClump16Mixing  = 0.15
	lanceClump16RowsPer = 0.27e6
)

// curveColors tell the curves apart (a family, and the passes of the
// combined one); the data set is the dash.
var curveColors = map[string]color.Color{
	"memory":     color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"passes":     color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	"combined 2": color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	"combined 4": color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
}

var curveNames = map[string]string{
	"memory":     "ShuffleMemory",
	"passes":     "ShufflePasses (default window)",
	"combined 2": "ShufflePasses 2 and ShuffleMemory",
	"combined 4": "ShufflePasses 4 and ShuffleMemory",
}

// mixCurve is one curve's points on one data set: a family's, and for the
// combined family one number of passes'.
type mixCurve struct {
	data, key string
	points    []*record
}

// curve is the key of the curve p is drawn on.
func (p sweepPoint) curve() string {
	if f := p.family(); f != "combined" {
		return f
	}
	return fmt.Sprintf("combined %d", p.passes)
}

// mixCurves gathers the sweep's curves of lines; each starts at its data
// set's default shuffled line where that is there, but the combined ones,
// which start at their own first point.
func mixCurves(lines []*record) []mixCurve {
	byName := map[string]*record{}
	for _, r := range lines {
		if measured(r) {
			byName[r.str("scenario")] = r
		}
	}
	var out []mixCurve
	for _, data := range []string{"pyarrow", "table131k"} {
		for _, key := range []string{"memory", "passes", "combined 2", "combined 4"} {
			c := mixCurve{data: data, key: key}
			if d := byName[data+"_shuffled"]; d != nil && (key == "memory" || key == "passes") {
				c.points = append(c.points, d)
			}
			for _, p := range sweepPoints {
				if r := byName[p.name(data)]; r != nil && p.curve() == key {
					c.points = append(c.points, r)
				}
			}
			if len(c.points) > 1 {
				out = append(out, c)
			}
		}
	}
	return out
}

// pointName labels a sweep point by its setting: p (passes) and the
// memory in row groups of its data set.
func pointName(r *record) string {
	n := r.str("scenario")
	if i := strings.Index(n, "_sweep_"); i >= 0 {
		return strings.ReplaceAll(n[i+len("_sweep_"):], "_", " ")
	}
	return "default"
}

// mixingPlot is mixing against peak heap over the default shuffled line's.
func mixingPlot(lines []*record) (*plot.Plot, vg.Length, vg.Length, error) {
	return mixingCurvesPlot(lines, "peak Go heap ÷ the default shuffled line's (same data)", func(r *record) (float64, bool) {
		return num(r.get("peak_heap_vs_shuffled"))
	}, true)
}

// mixingSpeedPlot is mixing against rows/s.
func mixingSpeedPlot(lines []*record) (*plot.Plot, vg.Length, vg.Length, error) {
	return mixingCurvesPlot(lines, "million rows/s (one rank, the whole epoch)", func(r *record) (float64, bool) {
		v, ok := num(r.get("rows_per_s"))
		return v / 1e6, ok
	}, false)
}

// mixingCurvesPlot draws the curves of mixCurves with x of each point, the
// mixing targets (0.15 and 0.05) across, and LanceDB's clump-16 figure: a
// line across on the memory plot (its memory is not measured in Go heap),
// a point on the rows/s one. heap marks the 1.2 × heap target.
func mixingCurvesPlot(lines []*record, xLabel string, x func(*record) (float64, bool), heap bool) (*plot.Plot, vg.Length, vg.Length, error) {
	curves := mixCurves(lines)
	if len(curves) == 0 {
		return nil, 0, 0, nil
	}
	title := "sluice shuffled: mixing against memory (label-sorted data; 1,048,576-row groups solid, 131,072 dashed)"
	if !heap {
		title = "sluice shuffled: mixing against rows/s (label-sorted data; 1,048,576-row groups solid, 131,072 dashed)"
	}
	p := newPlot(title, lines)
	// Where the curves leave room: top right against memory (the
	// settings of much memory mix well), bottom right against rows/s.
	p.Legend.Top = heap
	p.X.Label.Text = xLabel
	p.Y.Label.Text = "mixing: mean TVD of batch label histograms (lower is better)"
	p.Add(plotter.NewGrid())
	hi := 0.0
	for _, c := range curves {
		var xys plotter.XYs
		var labels []string
		for _, r := range c.points {
			xv, ok1 := x(r)
			mix, ok2 := num(r.get("mixing"))
			if !ok1 || !ok2 {
				continue
			}
			xys = append(xys, plotter.XY{X: xv, Y: mix})
			labels = append(labels, pointName(r))
			hi = max(hi, xv)
		}
		if len(xys) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, 0, 0, err
		}
		line.Color, points.Color = curveColors[c.key], curveColors[c.key]
		points.Shape = draw.CircleGlyph{}
		if c.data == "table131k" {
			line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			points.Shape = draw.BoxGlyph{}
		}
		p.Add(line, points)
		p.Legend.Add(fmt.Sprintf("%s, %s", curveNames[c.key], c.data), line, points)
		lb, err := pointLabels(xys, labels, 7, draw.XLeft, draw.YBottom, vg.Point{X: vg.Points(3), Y: vg.Points(2)})
		if err != nil {
			return nil, 0, 0, err
		}
		p.Add(lb)
	}
	lanceMix, lanceRate, lanceFrom := lanceClump16(lines)
	if !heap {
		hi = max(hi, lanceRate/1e6)
	}
	right := hi * 1.15
	across := func(y float64, c color.Color, name string) error {
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: y}, {X: right, Y: y}})
		if err != nil {
			return err
		}
		l.Color = c
		l.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(l)
		if name != "" {
			p.Legend.Add(name, l)
		}
		return nil
	}
	grey := color.Gray{Y: 0x80}
	if err := across(0.15, grey, "0.15 and 0.05: the targets of mix15 and mix05"); err != nil {
		return nil, 0, 0, err
	}
	if err := across(0.05, grey, ""); err != nil {
		return nil, 0, 0, err
	}
	lance := fmt.Sprintf("LanceDB clump 16: %.3g at %s rows/s (%s)", lanceMix, humanRate(lanceRate), lanceFrom)
	if heap {
		l, err := plotter.NewLine(plotter.XYs{{X: 1.2, Y: 0}, {X: 1.2, Y: 1}})
		if err != nil {
			return nil, 0, 0, err
		}
		l.Color = grey
		l.Dashes = []vg.Length{vg.Points(6), vg.Points(2)}
		p.Add(l)
		p.Legend.Add("1.2 × the default shuffled heap: the mix15 target", l)
		if err := across(lanceMix, readerColors["lancedb"], lance); err != nil {
			return nil, 0, 0, err
		}
	} else {
		s, err := plotter.NewScatter(plotter.XYs{{X: lanceRate / 1e6, Y: lanceMix}})
		if err != nil {
			return nil, 0, 0, err
		}
		s.Color = readerColors["lancedb"]
		s.Shape = draw.PyramidGlyph{}
		s.Radius = vg.Points(5)
		p.Add(s)
		p.Legend.Add(lance, s)
	}
	p.X.Min, p.X.Max = 0, right
	p.Y.Min, p.Y.Max = 0, 1
	return p, vg.Points(760), vg.Points(520), nil
}

// lanceClump16 is LanceDB's clump-16 mixing and rows/s: this run's peers
// line where it has one, else issue 16's figure.
func lanceClump16(lines []*record) (mixing, rowsPerS float64, from string) {
	for _, r := range lines {
		if r.str("scenario") != "lancedb_shuffled_clump16" || !measured(r) {
			continue
		}
		if m, ok := num(r.get("mixing")); ok {
			return m, r.float("rows_per_s"), "this run"
		}
	}
	return lanceClump16Mixing, lanceClump16RowsPer, "issue 16"
}
