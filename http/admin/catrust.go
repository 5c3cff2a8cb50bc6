package admin

// Trust stores for the root CA: install-ca and uninstall-ca.
//
// install-ca puts the root in the system trust store and in every NSS
// database it finds for the user the node runs as (HOME): Firefox and
// Chromium on Linux keep their own stores and ignore the system one.
// uninstall-ca takes out exactly what install-ca puts in (the system
// file, and the certificate under the nickname NSSNickname in each NSS
// database). Each answers "OK" followed by one line per thing done, so
// a user running it with curl sees what changed on the machine.
//
// The NSS databases looked for (SQL format, cert9.db; certutil from
// libnss3-tools does the work, as Debian's own tools and mkcert do):
//
//   - ~/.pki/nssdb (Chromium, Chrome and other NSS programs);
//   - ~/.mozilla/firefox/*/ (each Firefox profile);
//   - ~/snap/firefox/common/.mozilla/firefox/*/ and
//     ~/snap/chromium/current/.pki/nssdb (the snap packages);
//   - ~/.var/app/org.mozilla.firefox/.mozilla/firefox/*/ (flatpak).
//
// A store that is missing is skipped; without certutil the NSS part is
// skipped with a line saying how to get it. A node run as root through
// sudo has root's HOME: the desktop user's browsers are then not
// touched (the line says so by naming the folders it looked in).

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// NSSNickname is the name the root carries in NSS databases.
const NSSNickname = "peerdns local root CA"

// trustFile is the root's file name in the system store folders.
const trustFile = "peerdns-root.crt"

// nssDatabases lists the NSS databases (folders holding cert9.db)
// under home.
func nssDatabases(home string) []string {
	var out []string
	add := func(dir string) {
		if st, err := os.Stat(filepath.Join(dir, "cert9.db")); err == nil && st.Mode().IsRegular() {
			out = append(out, dir)
		}
	}
	add(filepath.Join(home, ".pki", "nssdb"))
	add(filepath.Join(home, "snap", "chromium", "current", ".pki", "nssdb"))
	for _, profiles := range []string{
		filepath.Join(home, ".mozilla", "firefox"),
		filepath.Join(home, "snap", "firefox", "common", ".mozilla", "firefox"),
		filepath.Join(home, ".var", "app", "org.mozilla.firefox", ".mozilla", "firefox"),
	} {
		ents, err := os.ReadDir(profiles)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.IsDir() {
				add(filepath.Join(profiles, e.Name()))
			}
		}
	}
	return out
}

// nss runs f on each NSS database of the user and returns one line per
// database, or one line saying why none was touched.
func nss(f func(certutil, db string) (string, error)) ([]string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return []string{"nss: skipped: no home folder (" + err.Error() + ")"}, nil
	}
	dbs := nssDatabases(home)
	if len(dbs) == 0 {
		return []string{"nss: no Firefox or Chromium certificate database under " + home}, nil
	}
	certutil, err := exec.LookPath("certutil")
	if err != nil {
		return []string{fmt.Sprintf("nss: skipped %d database(s) under %s: certutil not found (apt-get install libnss3-tools)", len(dbs), home)}, nil
	}
	var lines []string
	var errs []error
	for _, db := range dbs {
		line, err := f(certutil, db)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		lines = append(lines, line)
	}
	return lines, errors.Join(errs...)
}

// nssHas reports whether db holds the root's nickname.
func nssHas(certutil, db string) bool {
	return exec.Command(certutil, "-d", "sql:"+db, "-L", "-n", NSSNickname).Run() == nil
}

// nssInstall adds (or replaces) the root in db as a trusted TLS issuer.
func nssInstall(root string) func(certutil, db string) (string, error) {
	return func(certutil, db string) (string, error) {
		if nssHas(certutil, db) { // replace a root of an earlier regenerate-ca
			if out, err := exec.Command(certutil, "-d", "sql:"+db, "-D", "-n", NSSNickname).CombinedOutput(); err != nil {
				return "", fmt.Errorf("certutil -D in %s: %v: %s", db, err, strings.TrimSpace(string(out)))
			}
		}
		// "C,," trusts it to issue TLS server certificates only (not mail,
		// not code).
		out, err := exec.Command(certutil, "-d", "sql:"+db, "-A", "-t", "C,,", "-n", NSSNickname, "-i", root).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("certutil -A in %s: %v: %s", db, err, strings.TrimSpace(string(out)))
		}
		return fmt.Sprintf("nss: added %q (trusted for TLS servers) to %s", NSSNickname, db), nil
	}
}

// nssUninstall removes the root from db.
func nssUninstall(certutil, db string) (string, error) {
	if !nssHas(certutil, db) {
		return "nss: " + db + " does not hold it", nil
	}
	out, err := exec.Command(certutil, "-d", "sql:"+db, "-D", "-n", NSSNickname).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("certutil -D in %s: %v: %s", db, err, strings.TrimSpace(string(out)))
	}
	return fmt.Sprintf("nss: removed %q from %s", NSSNickname, db), nil
}

// installCA puts the root in the system store and the NSS databases and
// says what it did. The system store:
//
//   - PEERDNS_CA_TRUST_DIR set: copied there as peerdns-root.crt and
//     nothing else is run (tests, or a store managed by hand);
//   - Linux, Debian family: /usr/local/share/ca-certificates, then
//     update-ca-certificates; Fedora family: /etc/pki/ca-trust/source/
//     anchors, then update-ca-trust;
//   - macOS: security add-trusted-cert into the system keychain.
//
// Without the privileges for the system store it still does the NSS
// databases (they belong to the user) and then fails with the command to
// run for the rest.
func installCA(root string) ([]string, error) {
	lines, nssErr := nss(nssInstall(root))
	sys, err := installSystem(root)
	if err != nil {
		return lines, errors.Join(err, nssErr)
	}
	return append([]string{"system: " + sys}, lines...), nssErr
}

// uninstallCA takes out what installCA put in.
func uninstallCA() ([]string, error) {
	lines, nssErr := nss(nssUninstall)
	sys, err := uninstallSystem()
	if err != nil {
		return lines, errors.Join(err, nssErr)
	}
	return append([]string{"system: " + sys}, lines...), nssErr
}

// systemStore is the folder and refresh command of the Linux system
// store.
func systemStore() (dir, update string) {
	dir, update = "/usr/local/share/ca-certificates", "update-ca-certificates"
	if _, err := exec.LookPath(update); err != nil {
		if _, err := exec.LookPath("update-ca-trust"); err == nil {
			dir, update = "/etc/pki/ca-trust/source/anchors", "update-ca-trust"
		}
	}
	return dir, update
}

func installSystem(root string) (string, error) {
	b, err := os.ReadFile(root)
	if err != nil {
		return "", err
	}
	if dir := os.Getenv("PEERDNS_CA_TRUST_DIR"); dir != "" {
		dst := filepath.Join(dir, trustFile)
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			return "", err
		}
		return "copied to " + dst, nil
	}
	switch runtime.GOOS {
	case "darwin":
		cmd := []string{"security", "add-trusted-cert", "-d", "-r", "trustRoot", "-p", "ssl", "-k", "/Library/Keychains/System.keychain", root}
		if os.Geteuid() != 0 {
			return "", fmt.Errorf("installing the root CA in the system store needs root: run `sudo %s`", strings.Join(cmd, " "))
		}
		if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			return "", fmt.Errorf("%s: %v: %s", cmd[0], err, out)
		}
		return "added to the system keychain", nil
	case "linux":
		dir, update := systemStore()
		dst := filepath.Join(dir, trustFile)
		if os.Geteuid() != 0 {
			return "", fmt.Errorf("installing the root CA in the system store needs root: run `sudo cp %s %s && sudo %s`", root, dst, update)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			return "", err
		}
		if out, err := exec.Command(update).CombinedOutput(); err != nil {
			return "", fmt.Errorf("%s: %v: %s", update, err, out)
		}
		return "copied to " + dst + " and " + update + " run", nil
	}
	return "", fmt.Errorf("installing the root CA is not supported on %s: trust %s by hand", runtime.GOOS, root)
}

func uninstallSystem() (string, error) {
	if dir := os.Getenv("PEERDNS_CA_TRUST_DIR"); dir != "" {
		dst := filepath.Join(dir, trustFile)
		if err := os.Remove(dst); errors.Is(err, os.ErrNotExist) {
			return dst + " was not there", nil
		} else if err != nil {
			return "", err
		}
		return "removed " + dst, nil
	}
	switch runtime.GOOS {
	case "darwin":
		cmd := []string{"security", "delete-certificate", "-c", "peerdns local root CA", "/Library/Keychains/System.keychain"}
		if os.Geteuid() != 0 {
			return "", fmt.Errorf("removing the root CA from the system store needs root: run `sudo %s`", strings.Join(cmd, " "))
		}
		if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			return "", fmt.Errorf("%s: %v: %s", cmd[0], err, out)
		}
		return "removed from the system keychain", nil
	case "linux":
		dir, update := systemStore()
		dst := filepath.Join(dir, trustFile)
		if _, err := os.Stat(dst); errors.Is(err, os.ErrNotExist) {
			return dst + " was not there", nil
		}
		if os.Geteuid() != 0 {
			fresh := update
			if update == "update-ca-certificates" {
				fresh += " --fresh"
			}
			return "", fmt.Errorf("removing the root CA from the system store needs root: run `sudo rm %s && sudo %s`", dst, fresh)
		}
		if err := os.Remove(dst); err != nil {
			return "", err
		}
		args := []string{}
		if update == "update-ca-certificates" {
			args = append(args, "--fresh") // drops the link it made in /etc/ssl/certs
		}
		if out, err := exec.Command(update, args...).CombinedOutput(); err != nil {
			return "", fmt.Errorf("%s: %v: %s", update, err, out)
		}
		return "removed " + dst + " and " + update + " run", nil
	}
	return "", fmt.Errorf("removing the root CA is not supported on %s: remove it by hand", runtime.GOOS)
}
