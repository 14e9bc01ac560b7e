package podrun

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// Mountpoints creates the mount targets a container needs that the host lacks (say
// /etc/interlink-shadow/ssh): a bind mount needs an existing target, and the private mount namespace
// shares the host's filesystem, so the target must exist on the host. Each path created is
// counted per user and removed (if empty) when the last pod that needed it is gone, so the
// host keeps no clutter after the pods. One Mountpoints serves the whole node.
type Mountpoints struct {
	mu sync.Mutex
	// users counts, per path this node created, the pods holding it.
	users map[string]map[string]bool
}

// NewMountpoints returns an empty registry.
func NewMountpoints() *Mountpoints { return &Mountpoints{users: map[string]map[string]bool{}} }

// Acquire makes target (a directory, or an empty file if dir is false) exist for holder,
// creating missing parents too, and records what it created or already created for others.
func (m *Mountpoints) Acquire(holder, target string, dir bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var missing []string
	for p := filepath.Clean(target); p != "/"; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil {
			if !fi.IsDir() && p != filepath.Clean(target) {
				// A file is in the way: a container runtime refuses the mount, and so does
				// this node (runc: mounting ... to rootfs at <target>: not a directory).
				return fmt.Errorf("mount target %s: %s is a file, not a directory", target, p)
			}
			if m.users[p] != nil {
				missing = append(missing, p) // ours already: count this holder too
				continue
			}
			break
		}
		missing = append(missing, p)
	}
	// Parents first.
	for i := len(missing) - 1; i >= 0; i-- {
		p := missing[i]
		if m.users[p] == nil {
			var err error
			if p == filepath.Clean(target) && !dir {
				err = makeTarget(p, false)
			} else {
				err = os.Mkdir(p, 0o755)
			}
			if err != nil && !os.IsExist(err) {
				return fmt.Errorf("create mount target %s: %w", p, err)
			}
			m.users[p] = map[string]bool{}
		}
		m.users[p][holder] = true
	}
	return nil
}

// Release drops holder's claims and removes the paths nobody holds any more, deepest first;
// a path someone else filled meanwhile is left.
func (m *Mountpoints) Release(holder string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var free []string
	for p, hs := range m.users {
		if hs[holder] {
			delete(hs, holder)
			if len(hs) == 0 {
				free = append(free, p)
			}
		}
	}
	sort.Slice(free, func(i, j int) bool { return strings.Count(free[i], "/") > strings.Count(free[j], "/") })
	for _, p := range free {
		_ = os.Remove(p)
		delete(m.users, p)
	}
}
