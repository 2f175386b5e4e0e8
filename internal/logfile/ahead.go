package logfile

// Loading frames ahead. A binary frame is read, checked, decompressed and
// column-decoded on its own (loadBinary), which is nearly all of reading a
// file; only merging the frames' positions (RecordBatches) must go in
// order. So while RecordBatches takes frame i, other goroutines may load
// frames i+1, i+2, ... into their own buffers, each as long as it holds a
// token: a file that is one large channel then decodes on every core the
// caller lets it have, and RecordBatches hands over the same records, in
// the same order, with the same damage found and counted as in one
// goroutine. A caller that decodes several files at once shares one set of
// tokens among them, so that the cores a finished file frees go to the
// files still being read.

// LoadAhead lets RecordBatches load frames ahead on other goroutines, one
// for each token it can take from tokens at the time (a send that does not
// block takes one; the goroutine gives it back with a receive when its
// frame is loaded). A caller that reads the file itself should hold a
// token while it does, so that cap(tokens) is the cores all readers use.
// ASCII files are read in one goroutine.
func (lf *File) LoadAhead(tokens chan struct{}) { lf.ahead = tokens }

// aheadWindow bounds the frames loaded ahead of the one being merged, so
// that memory stays a few frames' worth however many tokens there are.
const aheadWindow = 8

// frameLoader loads RecordBatches' entries in order, some of them ahead.
type frameLoader struct {
	lf     *File
	ents   []entry
	tokens chan struct{}
	next   int // the first entry not started
	slots  [aheadWindow]*loaded
	free   []*loaded // results handed over and done with, to reuse
	last   *loaded   // the result handed over last (in use until the next load)
	own    []byte    // an entry loaded here, when others load ahead
}

// loaded is one entry loaded ahead; done is closed when it is.
type loaded struct {
	fb   frameBufs
	raw  []byte
	bad  []uint32
	err  error
	done chan struct{}
}

func (lf *File) newAhead(ents []entry) *frameLoader {
	l := &frameLoader{lf: lf, ents: ents}
	if !lf.ascii {
		l.tokens = lf.ahead
	}
	return l
}

// load returns entry i's records, as loadRecords does (dst and bad are
// reused when no frame is loaded ahead). Entries are asked for in order;
// what load returned is the caller's until it calls load again.
func (l *frameLoader) load(i int, dst []byte, bad []uint32) ([]byte, []uint32, error) {
	if l.tokens == nil {
		return l.lf.loadRecords(dst, bad, l.ents[i])
	}
	if l.last != nil {
		l.free = append(l.free, l.last)
		l.last = nil
	}
	if i >= l.next { // not started: loaded here, after the next ones start
		l.next = i + 1
		l.startAhead(i)
		// Into a buffer of its own: dst may be a result of a frame loaded
		// ahead, which a goroutine may be given again by now.
		raw, bad, err := l.lf.loadBinary(&l.lf.frameBufs, l.own[:0], l.ents[i])
		l.own = raw
		return raw, bad, err
	}
	l.startAhead(i)
	r := l.slots[i%aheadWindow]
	l.slots[i%aheadWindow] = nil
	<-r.done
	l.last = r
	return r.raw, r.bad, r.err
}

// startAhead starts loading the entries after i, within the window, while
// tokens can be had.
func (l *frameLoader) startAhead(i int) {
	for l.next < len(l.ents) && l.next <= i+aheadWindow-1 {
		select {
		case l.tokens <- struct{}{}:
		default:
			return
		}
		var r *loaded
		if n := len(l.free); n > 0 {
			r, l.free = l.free[n-1], l.free[:n-1]
		} else {
			r = &loaded{}
		}
		r.done = make(chan struct{})
		l.slots[l.next%aheadWindow] = r
		go func(e entry) {
			r.raw, r.bad, r.err = l.lf.loadBinary(&r.fb, r.raw[:0], e)
			<-l.tokens // back before done: a finished read holds none
			close(r.done)
		}(l.ents[l.next])
		l.next++
	}
}

// stop waits for the entries still loading (RecordBatches returned early):
// none outlives the read, so the file may be closed.
func (l *frameLoader) stop() {
	for _, r := range l.slots {
		if r != nil {
			<-r.done
		}
	}
}
