package minrtt

import (
	"fmt"
	"testing"
)

// benchModel: four nodes, four rounds of 200 probes per direction.
func benchModel(b *testing.B, meth Method) (*Model, *sim) {
	s := newSim(9)
	rs := s.rounds([]float64{10 * minute, 12 * minute, 14 * minute, 16 * minute})
	m, err := NewModel(rs, Options{Ref: "a", Method: meth})
	if err != nil {
		b.Fatal(err)
	}
	return m, s
}

// BenchmarkDuration: ns per DurationIdx call, a mix of the four scenarios
// (random ends), per method.
func BenchmarkDuration(b *testing.B) {
	for _, meth := range []Method{MethodBest, MethodPaper, MethodAllProbes} {
		b.Run(meth.String(), func(b *testing.B) {
			m, s := benchModel(b, meth)
			const n = 1024
			var si, ei [n]int
			var st, en [n]uint64
			for i := 0; i < n; i++ {
				tau := 11*minute + s.rng.Float64()*4*minute
				a, c := s.rng.Intn(4), s.rng.Intn(4)
				si[i], ei[i] = m.NodeIndex(s.nodes[a].name), m.NodeIndex(s.nodes[c].name)
				st[i], en[i] = s.nodes[a].read(tau), s.nodes[c].read(tau+3e6)
			}
			b.ReportAllocs()
			b.ResetTimer()
			var sum float64
			for i := 0; i < b.N; i++ {
				k := i & (n - 1)
				sum += m.DurationIdx(si[k], st[k], ei[k], en[k]).Err
			}
			_ = sum
		})
	}
}

// BenchmarkDurationScenario3: the costliest case, two non-reference nodes.
func BenchmarkDurationScenario3(b *testing.B) {
	m, s := benchModel(b, MethodBest)
	bi, ci := m.NodeIndex("b"), m.NodeIndex("c")
	u, v := s.nodes[1].read(13*minute), s.nodes[2].read(13*minute+3e6)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = m.DurationIdx(bi, u+uint64(i&1023), ci, v)
	}
}

// BenchmarkPoint: ns per PointIdx call off the reference.
func BenchmarkPoint(b *testing.B) {
	m, s := benchModel(b, MethodBest)
	bi := m.NodeIndex("b")
	c := s.nodes[1].read(13 * minute)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = m.PointIdx(bi, c+uint64(i&1023))
	}
}

// BenchmarkNewModel: building the model from four rounds.
func BenchmarkNewModel(b *testing.B) {
	s := newSim(9)
	rs := s.rounds([]float64{10 * minute, 12 * minute, 14 * minute, 16 * minute})
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := NewModel(rs, Options{Ref: "a"}); err != nil {
			b.Fatal(err)
		}
	}
}

// benchQueries: n random duration queries of the benchmark model, ends 1 ms
// apart within the rounds; scenario -1 any mix, else only that scenario.
func benchQueries(m *Model, s *sim, n, scenario int) (si, ei []int, st, en []uint64) {
	for len(si) < n {
		tau := 11*minute + s.rng.Float64()*4*minute
		a, c := s.rng.Intn(4), s.rng.Intn(4)
		i, j := m.NodeIndex(s.nodes[a].name), m.NodeIndex(s.nodes[c].name)
		u, v := s.nodes[a].read(tau), s.nodes[c].read(tau+3e6)
		if scenario >= 0 && m.DurationIdx(i, u, j, v).Scenario != scenario {
			continue
		}
		si, ei, st, en = append(si, i), append(ei, j), append(st, u), append(en, v)
	}
	return
}

// BenchmarkTranslate: ns per translation stored in a slice (as the
// analysis keeps one per record), off the reference per method and on it;
// TranslateInto, and Translate ("-value", through a temporary).
func BenchmarkTranslate(b *testing.B) {
	run := func(b *testing.B, meth Method, node string, value bool) {
		m, s := benchModel(b, meth)
		i := m.NodeIndex(node)
		c := s.nodes[i].read(13 * minute)
		ts := make([]Translated, 1024)
		b.ReportAllocs()
		b.ResetTimer()
		if value {
			for k := 0; k < b.N; k++ {
				ts[k&1023] = m.Translate(i, c+uint64(k&1023))
			}
			return
		}
		for k := 0; k < b.N; k++ {
			m.TranslateInto(&ts[k&1023], i, c+uint64(k&1023))
		}
	}
	for _, meth := range []Method{MethodBest, MethodPaper, MethodAllProbes} {
		b.Run(meth.String(), func(b *testing.B) { run(b, meth, "b", false) })
	}
	b.Run("ref", func(b *testing.B) { run(b, MethodBest, "a", false) })
	b.Run("best-value", func(b *testing.B) { run(b, MethodBest, "b", true) })
	b.Run("ref-value", func(b *testing.B) { run(b, MethodBest, "a", true) })
}

// BenchmarkDurationTranslated: ns per DurationTranslated of readings
// translated beforehand: the mix of BenchmarkDuration per method, and per
// scenario (best method) with BenchmarkDurationIdx on the same queries.
func BenchmarkDurationTranslated(b *testing.B) {
	run := func(b *testing.B, meth Method, scenario int) {
		m, s := benchModel(b, meth)
		const n = 1024
		si, ei, st, en := benchQueries(m, s, n, scenario)
		ts, te := make([]Translated, n), make([]Translated, n)
		for k := range ts {
			m.TranslateInto(&ts[k], si[k], st[k])
			m.TranslateInto(&te[k], ei[k], en[k])
		}
		b.ReportAllocs()
		b.ResetTimer()
		var sum float64
		for i := 0; i < b.N; i++ {
			k := i & (n - 1)
			sum += m.DurationTranslated(&ts[k], &te[k]).Err
		}
		_ = sum
	}
	for _, meth := range []Method{MethodBest, MethodPaper, MethodAllProbes} {
		b.Run(meth.String(), func(b *testing.B) { run(b, meth, -1) })
	}
	for sc := 0; sc <= 3; sc++ {
		b.Run(fmt.Sprintf("scenario%d", sc), func(b *testing.B) { run(b, MethodBest, sc) })
	}
}

// BenchmarkDurationIdx: DurationIdx per scenario (best method), the
// queries of BenchmarkDurationTranslated.
func BenchmarkDurationIdx(b *testing.B) {
	for sc := 0; sc <= 3; sc++ {
		b.Run(fmt.Sprintf("scenario%d", sc), func(b *testing.B) {
			m, s := benchModel(b, MethodBest)
			const n = 1024
			si, ei, st, en := benchQueries(m, s, n, sc)
			b.ReportAllocs()
			b.ResetTimer()
			var sum float64
			for i := 0; i < b.N; i++ {
				k := i & (n - 1)
				sum += m.DurationIdx(si[k], st[k], ei[k], en[k]).Err
			}
			_ = sum
		})
	}
}

// BenchmarkRecord: what the analysis does per record, a reading's value and
// the duration from the previous record: idx translates the reading once
// for PointRelIdx and again in DurationIdx; translated once, kept.
func BenchmarkRecord(b *testing.B) {
	m, s := benchModel(b, MethodBest)
	const n = 1024
	node := make([]int, n)
	read := make([]uint64, n)
	for k := range node {
		a := s.rng.Intn(4)
		node[k], read[k] = m.NodeIndex(s.nodes[a].name), s.nodes[a].read(11*minute+float64(k)*3e6)
	}
	b.Run("idx", func(b *testing.B) {
		b.ReportAllocs()
		var sum float64
		for i := 1; i <= b.N; i++ {
			k, p := i&(n-1), (i-1)&(n-1)
			sum += m.PointRelIdx(node[k], read[k]).Err
			sum += m.DurationIdx(node[p], read[p], node[k], read[k]).Err
		}
		_ = sum
	})
	b.Run("translated", func(b *testing.B) {
		b.ReportAllocs()
		var sum float64
		ts := make([]Translated, n)
		m.TranslateInto(&ts[0], node[0], read[0])
		for i := 1; i <= b.N; i++ {
			k, p := i&(n-1), (i-1)&(n-1)
			t := &ts[k]
			m.TranslateInto(t, node[k], read[k])
			sum += t.Value(m).Err
			sum += m.DurationTranslated(&ts[p], t).Err
		}
		_ = sum
	})
}
