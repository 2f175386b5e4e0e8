package minrtt

import "testing"

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
