package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	"github.com/interlink-hq/shadowgate/e2e/site/internal/batch"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
)

// maxTailScan bounds how much of a log the node reads back to find its last lines.
const maxTailScan = 8 << 20

// followInterval is how often a followed log is read for more.
const followInterval = 500 * time.Millisecond

// GetContainerLogs returns a container's output from its file in the job directory, as
// kubectl logs asks for it: the last lines (--tail), at most so many bytes (--limit-bytes),
// and more as it comes until the container ends (--follow).
func (p *provider) GetContainerLogs(ctx context.Context, namespace, podName, container string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	pod, err := p.GetPod(ctx, namespace, podName)
	if err != nil {
		return nil, err
	}
	init := false
	found := false
	for _, c := range pod.Spec.InitContainers {
		if c.Name == container {
			init, found = true, true
		}
	}
	for _, c := range pod.Spec.Containers {
		found = found || c.Name == container
	}
	if !found {
		return nil, errdefs.NotFoundf("pod %s/%s has no container %s", namespace, podName, container)
	}
	name := path.Join(string(pod.UID), batch.ContainerOutput(container, init))
	f, err := p.work.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errdefs.InvalidInputf("container %s of pod %s/%s has not started: its job has not run it yet", container, namespace, podName)
	}
	if err != nil {
		return nil, err
	}
	if opts.Tail > 0 {
		if err := seekTail(f, opts.Tail); err != nil {
			f.Close()
			return nil, err
		}
	}
	var r io.Reader = f
	if opts.Follow {
		status := path.Join(string(pod.UID), batch.ContainerStatus(container, init))
		r = &follower{ctx: ctx, f: f, done: func() bool {
			_, err := p.work.Stat(status)
			return err == nil || p.gone(namespace, podName)
		}}
	}
	if opts.LimitBytes > 0 {
		r = io.LimitReader(r, int64(opts.LimitBytes))
	}
	return struct {
		io.Reader
		io.Closer
	}{r, f}, nil
}

func (p *provider) gone(namespace, name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	pj, ok := p.pods[key(namespace, name)]
	return !ok || pj.deleting
}

// seekTail positions f at the start of its last n lines, reading back at most maxTailScan.
func seekTail(f *os.File, n int) error {
	info, err := f.Stat()
	if err != nil {
		return err
	}
	from := max(0, info.Size()-maxTailScan)
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return err
	}
	var offsets []int64 // where each line starts
	pos := from
	sc := bufio.NewReader(f)
	for {
		line, err := sc.ReadBytes('\n')
		if len(line) > 0 {
			offsets = append(offsets, pos)
			pos += int64(len(line))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	start := from
	if len(offsets) > n {
		start = offsets[len(offsets)-n]
	}
	_, err = f.Seek(start, io.SeekStart)
	return err
}

// follower reads a growing file until done says the writer has finished and the end is read.
type follower struct {
	ctx  context.Context
	f    *os.File
	done func() bool
}

func (r *follower) Read(b []byte) (int, error) {
	for {
		finished := r.done() // asked before reading, so nothing written before the end is lost
		n, err := r.f.Read(b)
		if n > 0 || (err != nil && err != io.EOF) {
			return n, err
		}
		if finished {
			return 0, io.EOF
		}
		select {
		case <-r.ctx.Done():
			return 0, fmt.Errorf("following the log: %w", r.ctx.Err())
		case <-time.After(followInterval):
		}
	}
}
