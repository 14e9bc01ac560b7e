package podrun

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
)

// criTime is the timestamp of the CRI log format, the one the kubelet reads and prints.
const criTime = time.RFC3339Nano

// maxLogLine is where a line is cut into partial (P) records, as container runtimes do.
const maxLogLine = 16 * 1024

// maxLogBytes bounds one instance's log file; the kubelet rotates instead, the site's short
// lived pods do not need that, only a bound.
const maxLogBytes = 64 << 20

// logFile is one container instance's log in the CRI format
// ("<time> <stdout|stderr> <F|P> <text>"), written by both streams.
type logFile struct {
	mu      sync.Mutex
	f       *os.File
	written int
	drained sync.WaitGroup
}

func createLog(path string) (*logFile, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
	if err != nil {
		return nil, fmt.Errorf("container log: %w", err)
	}
	return &logFile{f: f}, nil
}

// pipe returns the write end to give the process as one stream; the read end is copied into
// the log until every holder of the write end has closed it.
func (l *logFile) pipe(stream string) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	l.drained.Add(1)
	go func() {
		defer l.drained.Done()
		defer r.Close()
		br := bufio.NewReaderSize(r, maxLogLine)
		for {
			line, err := br.ReadSlice('\n')
			switch {
			case err == nil:
				l.record(stream, "F", line[:len(line)-1])
			case errors.Is(err, bufio.ErrBufferFull):
				l.record(stream, "P", line)
			default:
				if len(line) > 0 {
					l.record(stream, "F", line)
				}
				return
			}
		}
	}()
	return w, nil
}

func (l *logFile) record(stream, tag string, text []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now().UTC().Format(criTime)
	switch {
	case l.written > maxLogBytes:
		return
	case l.written+len(text) > maxLogBytes:
		text = []byte(fmt.Sprintf("site processnode: log reached %d bytes, further output dropped", maxLogBytes))
		stream, tag = "stderr", "F"
		l.written = maxLogBytes
	}
	n, _ := fmt.Fprintf(l.f, "%s %s %s %s\n", now, stream, tag, text)
	l.written += n
}

// close waits (a bounded while: a forked child may hold a stream open) for the streams to
// drain, then closes the file.
func (l *logFile) close(wait time.Duration) {
	done := make(chan struct{})
	go func() { l.drained.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(wait):
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.f.Close()
}

// logRecord is one parsed line of a CRI log.
type logRecord struct {
	when    time.Time
	text    []byte
	partial bool
}

func parseRecord(line []byte) (logRecord, bool) {
	parts := bytes.SplitN(line, []byte(" "), 4)
	if len(parts) < 4 {
		return logRecord{}, false
	}
	t, err := time.Parse(criTime, string(parts[0]))
	if err != nil {
		return logRecord{}, false
	}
	return logRecord{when: t, text: parts[3], partial: string(parts[2]) == "P"}, true
}

// format is a record as `kubectl logs` shows it.
func (r logRecord) format(timestamps bool) []byte {
	var b bytes.Buffer
	if timestamps {
		b.WriteString(r.when.Format(criTime))
		b.WriteByte(' ')
	}
	b.Write(r.text)
	if !r.partial {
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// readLog streams a container instance's log into w by the kubelet's options. With Follow it
// keeps reading until finished reports the instance done and the file is read to its end, or
// ctx ends.
func readLog(ctx context.Context, path string, opts api.ContainerLogOpts, finished func() bool, w io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("container log: %w", err)
	}
	defer f.Close()
	since := opts.SinceTime
	if opts.SinceSeconds > 0 {
		since = time.Now().Add(-time.Duration(opts.SinceSeconds) * time.Second)
	}
	remaining := opts.LimitBytes
	emit := func(r logRecord) (bool, error) {
		if !since.IsZero() && r.when.Before(since) {
			return true, nil
		}
		out := r.format(opts.Timestamps)
		if opts.LimitBytes > 0 {
			if remaining <= 0 {
				return false, nil
			}
			if len(out) > remaining {
				out = out[:remaining]
			}
			remaining -= len(out)
		}
		_, err := w.Write(out)
		return err == nil, err
	}
	br := bufio.NewReaderSize(f, 2*maxLogLine)
	var pending []byte
	// next returns the next complete line of the file, or nil at its current end.
	next := func() []byte {
		for {
			chunk, err := br.ReadSlice('\n')
			pending = append(pending, chunk...)
			if err == nil {
				line := pending[:len(pending)-1]
				pending = nil
				return line
			}
			if !errors.Is(err, bufio.ErrBufferFull) {
				return nil
			}
		}
	}
	if opts.Tail > 0 {
		ring := make([]logRecord, 0, opts.Tail)
		for line := next(); line != nil; line = next() {
			r, ok := parseRecord(line)
			if !ok {
				continue
			}
			r.text = append([]byte(nil), r.text...)
			if len(ring) == opts.Tail {
				ring = append(ring[:0], ring[1:]...)
			}
			ring = append(ring, r)
		}
		for _, r := range ring {
			if more, err := emit(r); !more {
				return err
			}
		}
	}
	for {
		for line := next(); line != nil; line = next() {
			if r, ok := parseRecord(line); ok {
				if more, err := emit(r); !more {
					return err
				}
			}
		}
		if !opts.Follow {
			return nil
		}
		if finished() {
			// One last read: the writer may have appended after our read hit the end.
			for line := next(); line != nil; line = next() {
				if r, ok := parseRecord(line); ok {
					if more, err := emit(r); !more {
						return err
					}
				}
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}
