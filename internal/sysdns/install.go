package sysdns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Install writes the resolver configuration for o (see the package doc)
// and reloads systemd-resolved when it wrote the system's folder. Not
// root with a system folder: a *NeedsRootError with the commands to run.
func Install(o Options) (Result, error) {
	o.defaults()
	p, err := o.plan()
	if err != nil {
		return Result{}, err
	}
	srv, err := server(o.Addr)
	if err != nil {
		return Result{}, err
	}
	sfx, err := suffixes(o.Suffixes)
	if err != nil {
		return Result{}, err
	}
	res := Result{Layout: p.layout, Dir: p.dir, Server: srv.String(), Suffixes: sfx}
	if p.layout == LayoutResolved && srv.Port() != 53 {
		if v, tool := o.resolvedVersion(); v == 0 {
			res.Notes = append(res.Notes, fmt.Sprintf("could not tell the systemd-resolved version (no resolvectl or systemctl): DNS=%s needs systemd-resolved %d or later", srv, MinResolvedPortVersion))
		} else if v < MinResolvedPortVersion {
			return res, fmt.Errorf("systemd-resolved %d (from `%s --version`) cannot send queries to port %d: DNS=ip:port needs %d or later; run the node on port 53 (--system or --dns-addr 127.0.0.1:53) and install again", v, tool, srv.Port(), MinResolvedPortVersion)
		} else {
			res.Notes = append(res.Notes, fmt.Sprintf("systemd-resolved %d reads DNS=ip:port (needs %d or later)", v, MinResolvedPortVersion))
		}
	}
	files := content(p.layout, srv, sfx)
	names := sortedKeys(files)
	var write []string
	for _, name := range names {
		path := filepath.Join(p.dir, name)
		exists, mine, err := ours(path, true)
		if err != nil {
			return res, err
		}
		if exists && !mine {
			if p.layout == LayoutResolved {
				return res, fmt.Errorf("%s exists and is %w: move it away or merge it by hand, then install again", path, ErrNotOurs)
			}
			res.Kept = append(res.Kept, path)
			res.Notes = append(res.Notes, fmt.Sprintf("%s is %v: left alone, so .%s names follow it", path, ErrNotOurs, name))
			continue
		}
		write = append(write, name)
	}
	// Our files for suffixes no longer routed (macOS: one per suffix).
	// The systemd-resolved layout has one file, the drop-in, written
	// above: another file of its folder is not ours, header or not.
	var remove []string
	if p.layout == LayoutMacOS {
		stale, err := ownFiles(p.dir)
		if err != nil {
			return res, err
		}
		for _, name := range stale {
			if _, keep := files[name]; !keep {
				remove = append(remove, name)
			}
		}
	}
	reload := p.layout == LayoutResolved && !p.override
	if !p.override && !o.Root() {
		cmds := []string{"sudo mkdir -p " + shellQuote(p.dir)}
		for _, name := range write {
			lines := strings.Split(strings.TrimSuffix(files[name], "\n"), "\n")
			q := make([]string, len(lines))
			for i, l := range lines {
				q[i] = shellQuote(l)
			}
			cmds = append(cmds, fmt.Sprintf("printf '%%s\\n' %s | sudo tee %s >/dev/null", strings.Join(q, " "), shellQuote(filepath.Join(p.dir, name))))
		}
		for _, name := range remove {
			cmds = append(cmds, "sudo rm -f "+shellQuote(filepath.Join(p.dir, name)))
		}
		if reload {
			cmds = append(cmds, "sudo "+strings.Join(reloadResolved, " "))
		}
		return res, &NeedsRootError{Action: "install-dns", Commands: cmds}
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return res, err
	}
	for _, name := range write {
		path := filepath.Join(p.dir, name)
		if err := writeFile(path, files[name]); err != nil {
			return res, err
		}
		res.Written = append(res.Written, path)
	}
	err = o.removeAndReload(&res, p.dir, remove, reload)
	return res, err
}

// Uninstall removes every file Install wrote in the layout's folder (and
// nothing else), then reloads systemd-resolved when it removed the
// system's drop-in.
func Uninstall(o Options) (Result, error) {
	o.defaults()
	p, err := o.plan()
	if err != nil {
		return Result{}, err
	}
	res := Result{Layout: p.layout, Dir: p.dir}
	mine, err := ownFiles(p.dir)
	if err != nil {
		return res, err
	}
	if p.layout == LayoutMacOS {
		// An empty file of a routed suffix's name is ours too.
		sfx, err := suffixes(o.Suffixes)
		if err != nil {
			sfx, _ = suffixes(nil)
		}
		for _, name := range sfx {
			if b, err := os.ReadFile(filepath.Join(p.dir, name)); err == nil && len(b) == 0 {
				mine = append(mine, name)
			}
		}
	}
	if p.layout == LayoutResolved {
		// Only the drop-in is ours to take, even if another file in the
		// folder carries our header.
		path := filepath.Join(p.dir, dropIn)
		exists, ok, err := ours(path, true)
		if err != nil {
			return res, err
		}
		mine = nil
		if ok {
			mine = []string{dropIn}
		} else if exists {
			res.Kept = append(res.Kept, path)
			res.Notes = append(res.Notes, fmt.Sprintf("%s is %v: left alone", path, ErrNotOurs))
		}
	}
	if len(mine) == 0 {
		res.Notes = append(res.Notes, "nothing to remove: no file written by install-dns in "+p.dir)
		return res, nil
	}
	reload := p.layout == LayoutResolved && !p.override
	if !p.override && !o.Root() {
		var cmds []string
		for _, name := range mine {
			cmds = append(cmds, "sudo rm -f "+shellQuote(filepath.Join(p.dir, name)))
		}
		if reload {
			cmds = append(cmds, "sudo "+strings.Join(reloadResolved, " "))
		}
		return res, &NeedsRootError{Action: "uninstall-dns", Commands: cmds}
	}
	err = o.removeAndReload(&res, p.dir, mine, reload)
	return res, err
}

// removeAndReload removes the named files of dir (one already gone is
// fine) and then, when asked, has systemd-resolved read its
// configuration again; res lists what it removed.
func (o *Options) removeAndReload(res *Result, dir string, names []string, reload bool) error {
	for _, name := range names {
		path := filepath.Join(dir, name)
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		res.Removed = append(res.Removed, path)
	}
	if reload {
		return o.reload(res)
	}
	return nil
}

func (o *Options) reload(res *Result) error {
	if out, err := o.Run(reloadResolved); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(reloadResolved, " "), err, strings.TrimSpace(string(out)))
	}
	res.Commands = append(res.Commands, reloadResolved)
	return nil
}

// ownFiles lists the names of the files in dir that start with Header.
func ownFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		if _, mine, err := ours(filepath.Join(dir, e.Name()), false); err == nil && mine {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// writeFile replaces path atomically (a temporary file renamed over it),
// so a resolver never reads half a file, and durably: the file is synced
// before the rename and its folder after, so a power loss leaves the old
// file or the whole new one, not an empty one.
func writeFile(path, s string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".peerdns-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(s); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
