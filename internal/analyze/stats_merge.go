package analyze

// mergeStats adds o's values into s, as if s had been given them too: the
// workers' statistics are merged this way at the end of the join.
func mergeStats(s, o *Stats) {
	s.N += o.N
	s.Min = min(s.Min, o.Min)
	s.Max = max(s.Max, o.Max)
	s.zero += o.zero
	s.inf += o.inf
	for k, v := range o.hist {
		s.hist[k] += v
	}
	if s.N <= s.limit {
		s.exact = append(s.exact, o.exact...)
	} else {
		s.exact = nil
	}
}
