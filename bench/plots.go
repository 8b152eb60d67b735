package main

import (
	"fmt"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The plots of a run, PNG files made from its lines alone (so that they can
// be made again from a results.jsonl): a plot whose lines are missing is not
// made.
const (
	plotScenarios = "throughput_by_scenario.png"
	plotRead      = "throughput_by_read_concurrency.png"
	plotTransform = "throughput_by_transform_concurrency.png"
	plotQueues    = "queue_depths_shuffled.png"
)

// Colours of the readers, for every plot.
var readerColors = map[string]color.Color{
	"sluice":   color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"arrow-go": color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff},
	"duckdb":   color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	"lancedb":  color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
}

var readerOrder = []string{"sluice", "arrow-go", "duckdb", "lancedb"}

// writePlots writes the plots of lines into dir and returns their names.
func writePlots(lines []*record, dir string) ([]string, error) {
	var names []string
	for _, p := range []struct {
		name string
		make func([]*record) (*plot.Plot, vg.Length, vg.Length, error)
	}{
		{plotScenarios, scenarioPlot},
		{plotRead, func(l []*record) (*plot.Plot, vg.Length, vg.Length, error) {
			return concurrencyPlot(l, "read_concurrency_", "ReadConcurrency (sequential, whole dataset)", "sluice throughput by read concurrency")
		}},
		{plotTransform, func(l []*record) (*plot.Plot, vg.Length, vg.Length, error) {
			return concurrencyPlot(l, "transform_", "TransformConcurrency (Map with a CPU-bound function)", "sluice throughput by transform concurrency")
		}},
		{plotQueues, queuePlot},
		{plotMixing, mixingPlot},
		{plotMixingSpeed, mixingSpeedPlot},
	} {
		pl, w, h, err := p.make(lines)
		if err != nil {
			return names, fmt.Errorf("%s: %w", p.name, err)
		}
		if pl == nil {
			continue
		}
		if err := savePNG(pl, w, h, filepath.Join(dir, p.name)); err != nil {
			return names, fmt.Errorf("%s: %w", p.name, err)
		}
		names = append(names, p.name)
	}
	return names, nil
}

// savePNG renders p at 96 dots per inch into a PNG file, compressed for
// speed: the plots are a few tens of kilobytes either way.
func savePNG(p *plot.Plot, w, h vg.Length, path string) error {
	c := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(96))
	m := vg.Points(8) // a margin, so that no label touches the edge
	p.Draw(draw.Crop(draw.New(c), m, -m, m/2, -m/2))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(f, c.Image()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// machineSummary is the second line of every plot's title: where and when.
func machineSummary(lines []*record) string {
	for _, r := range lines {
		if r.get("kind") != "machine" {
			continue
		}
		parts := []string{
			fmt.Sprintf("%s cores, %s", cell(r.get("cores")), r.str("cpu_model")),
			r.str("go_version"),
			r.str("date"),
		}
		if m := r.str("mode"); m != "" {
			parts = append(parts, m+" mode")
		}
		if l, ok := num(r.get("load_avg_1m")); ok {
			parts = append(parts, fmt.Sprintf("load %.1f at start", l))
		}
		return strings.Join(parts, ", ")
	}
	return "machine unknown"
}

func newPlot(title string, lines []*record) *plot.Plot {
	p := plot.New()
	p.Title.Text = title + "\n" + machineSummary(lines)
	p.Title.TextStyle.Font.Size = vg.Points(12)
	p.Title.Padding = vg.Points(6)
	p.Legend.Top = true
	return p
}

// measured reports whether r is a scenario line with a throughput.
func measured(r *record) bool {
	if r.get("kind") != "scenario" || r.get("skipped") != nil {
		return false
	}
	v, ok := num(r.get("rows_per_s"))
	return ok && v > 0
}

// reader is who read in a line: sluice, or the peer.
func reader(r *record) string {
	switch p := r.str("peer"); {
	case p != "":
		return p
	case r.str("scenario") == "floor":
		return "arrow-go"
	}
	return "sluice"
}

// pointLabels are labels at xys in text of size points, aligned to their
// points as x and y say and moved by off.
func pointLabels(xys plotter.XYs, labels []string, size float64, x draw.XAlignment, y draw.YAlignment, off vg.Point) (*plotter.Labels, error) {
	lb, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
	if err != nil {
		return nil, err
	}
	for i := range lb.TextStyle {
		lb.TextStyle[i].XAlign = x
		lb.TextStyle[i].YAlign = y
		lb.TextStyle[i].Font.Size = vg.Points(size)
	}
	lb.Offset = off
	return lb, nil
}

// humanRate prints rows/s as 3.51M or 33.2k.
func humanRate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.3gk", v/1e3)
	}
	return fmt.Sprintf("%.3g", v)
}

// scenarioPlot is a horizontal bar per measured line, in the order of the
// run from the top, coloured by reader, its rows/s written at its end.
func scenarioPlot(lines []*record) (*plot.Plot, vg.Length, vg.Length, error) {
	var rs []*record
	for _, r := range lines {
		if measured(r) {
			rs = append(rs, r)
		}
	}
	if len(rs) == 0 {
		return nil, 0, 0, nil
	}
	p := newPlot("Throughput by scenario (sluice and peers, same files)", lines)
	p.X.Label.Text = "million rows/s"
	n := len(rs)
	names := make([]string, n)
	var xys plotter.XYs
	var labels []string
	top := 0.0
	legend := map[string]bool{}
	for i, r := range rs {
		y := float64(n - 1 - i) // the first line on top
		v := r.float("rows_per_s") / 1e6
		top = max(top, v)
		names[n-1-i] = r.str("scenario")
		bc, err := plotter.NewBarChart(plotter.Values{v}, vg.Points(13))
		if err != nil {
			return nil, 0, 0, err
		}
		bc.Horizontal = true
		bc.XMin = y
		bc.Color = readerColors[reader(r)]
		bc.LineStyle.Width = 0
		p.Add(bc)
		legend[reader(r)] = true
		xys = append(xys, plotter.XY{X: v, Y: y})
		label := humanRate(r.float("rows_per_s"))
		if ratio, ok := num(r.get("sluice_ratio")); ok {
			label += fmt.Sprintf("  (sluice ÷ peer %.2f)", ratio)
		}
		labels = append(labels, label)
	}
	lb, err := pointLabels(xys, labels, 9, draw.XLeft, draw.YCenter, vg.Point{X: vg.Points(4)})
	if err != nil {
		return nil, 0, 0, err
	}
	p.Add(lb)
	p.NominalY(names...)
	p.X.Min = 0
	p.X.Max = top * 1.6 // room for the labels and the legend
	p.Add(plotter.NewGrid())
	// One legend entry per reader, in a fixed order, top right.
	p.Legend.XOffs = -vg.Points(4)
	p.Legend.YOffs = -vg.Points(4)
	for _, who := range readerOrder {
		if legend[who] {
			p.Legend.Add(who, &swatch{c: readerColors[who]})
		}
	}
	return p, vg.Points(720), vg.Points(float64(110 + 19*n)), nil
}

// swatch is a legend thumbnail: a filled square of a colour.
type swatch struct{ c color.Color }

func (s *swatch) Thumbnail(c *draw.Canvas) {
	pts := []vg.Point{
		{X: c.Min.X, Y: c.Min.Y}, {X: c.Min.X, Y: c.Max.Y},
		{X: c.Max.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Min.Y},
	}
	c.FillPolygon(s.c, c.ClipPolygonY(pts))
}

// concurrencyPlot is a vertical bar of rows/s per line named prefix+N, in
// the order of N, labelled with rows/s, the ratio to the floor and, for
// transforms, the speedup over one goroutine.
func concurrencyPlot(lines []*record, prefix, xlabel, title string) (*plot.Plot, vg.Length, vg.Length, error) {
	var rs []*record
	for _, r := range lines {
		if measured(r) && strings.HasPrefix(r.str("scenario"), prefix) {
			if _, err := fmt.Sscanf(strings.TrimPrefix(r.str("scenario"), prefix), "%d", new(int)); err == nil {
				rs = append(rs, r)
			}
		}
	}
	if len(rs) == 0 {
		return nil, 0, 0, nil
	}
	p := newPlot(title, lines)
	p.Y.Label.Text = "million rows/s"
	p.X.Label.Text = xlabel
	var vals plotter.Values
	var names, labels []string
	var xys plotter.XYs
	top := 0.0
	for i, r := range rs {
		v := r.float("rows_per_s") / 1e6
		top = max(top, v)
		vals = append(vals, v)
		names = append(names, strings.TrimPrefix(r.str("scenario"), prefix))
		label := humanRate(r.float("rows_per_s"))
		if x, ok := num(r.get("ratio_vs_baseline")); ok {
			label += fmt.Sprintf("\n%.2f× floor", x)
		}
		if sp, ok := num(r.get("speedup")); ok {
			label += fmt.Sprintf("\nspeedup %.2f", sp)
		}
		labels = append(labels, label)
		xys = append(xys, plotter.XY{X: float64(i), Y: v})
	}
	bc, err := plotter.NewBarChart(vals, vg.Points(60))
	if err != nil {
		return nil, 0, 0, err
	}
	bc.Color = readerColors["sluice"]
	bc.LineStyle.Width = 0
	p.Add(plotter.NewGrid(), bc)
	lb, err := pointLabels(xys, labels, 9, draw.XCenter, draw.YBottom, vg.Point{Y: vg.Points(4)})
	if err != nil {
		return nil, 0, 0, err
	}
	p.Add(lb)
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(len(rs))-0.4
	p.Y.Min = 0
	p.Y.Max = top * 1.3
	return p, vg.Points(560), vg.Points(380), nil
}

// floats reads a list of numbers of a line: []float64 or []int as set in
// this process, []any as read back from JSON.
func floats(v any) []float64 {
	switch x := v.(type) {
	case []float64:
		return x
	case []int:
		out := make([]float64, len(x))
		for i, n := range x {
			out[i] = float64(n)
		}
		return out
	case []any:
		out := make([]float64, 0, len(x))
		for _, e := range x {
			f, _ := num(e)
			out = append(out, f)
		}
		return out
	}
	return nil
}

// queuePlot draws the first queue trace of lines: the raw and prefetch
// queue items over the pass, as steps, with their capacities dashed.
func queuePlot(lines []*record) (*plot.Plot, vg.Length, vg.Length, error) {
	var tr *record
	for _, r := range lines {
		if r.get("kind") == "trace" {
			tr = r
			break
		}
	}
	if tr == nil {
		return nil, 0, 0, nil
	}
	ts := floats(tr.get("t_s"))
	series := []struct {
		key, capKey, name string
		c                 color.Color
	}{
		{"raw_queue_items", "raw_queue_capacity", "raw queue (decoded windows waiting to be cut)", color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}},
		{"prefetch_queue_items", "prefetch_queue_capacity", "prefetch queue (batches ready, not taken)", readerColors["sluice"]},
	}
	p := newPlot(fmt.Sprintf("Queue depths over one %s run (sampled every %s ms)", tr.str("scenario"), cell(tr.get("interval_ms"))), lines)
	p.X.Label.Text = "seconds since Open"
	p.Y.Label.Text = "items in queue"
	p.Add(plotter.NewGrid())
	top := 1.0
	end := 0.0
	if len(ts) > 0 {
		end = ts[len(ts)-1]
	}
	for _, s := range series {
		ys := floats(tr.get(s.key))
		if len(ys) != len(ts) {
			return nil, 0, 0, fmt.Errorf("trace: %d times and %d %s", len(ts), len(ys), s.key)
		}
		xys := make(plotter.XYs, len(ts))
		for i := range ts {
			xys[i] = plotter.XY{X: ts[i], Y: ys[i]}
			top = max(top, ys[i])
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, 0, 0, err
		}
		l.StepStyle = plotter.PostStep
		l.Color = s.c
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(s.name, l)
		if c, ok := num(tr.get(s.capKey)); ok && c > 0 {
			top = max(top, c)
			cl, err := plotter.NewLine(plotter.XYs{{X: 0, Y: c}, {X: end, Y: c}})
			if err != nil {
				return nil, 0, 0, err
			}
			cl.Color = s.c
			cl.Dashes = []vg.Length{vg.Points(5), vg.Points(4)}
			cl.Width = vg.Points(1)
			p.Add(cl)
			p.Legend.Add(fmt.Sprintf("%s capacity (%g)", strings.Fields(s.name)[0], c), cl)
		}
	}
	p.Y.Min = 0
	p.Y.Max = math.Ceil(top*1.6) + 1 // room for the legend
	p.X.Min = 0
	return p, vg.Points(720), vg.Points(400), nil
}
