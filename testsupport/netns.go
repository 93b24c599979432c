//go:build linux

package testsupport

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

const (
	// netLabPrefix starts every namespace and link name a NetLab makes,
	// followed by the lab's index: leftovers of a crashed run are found by
	// it.
	netLabPrefix = "pdt"
	// netLabLabs is how many labs can exist at once on a machine; lab n
	// uses 10.254.n.0/24.
	netLabLabs = 200
	// netLabNamespaces is how many namespaces a lab holds besides its hub
	// (one /30 of its /24 each, the first being the root namespace's link).
	netLabNamespaces = 63
	// netLabCutPref is the priority of the hub's blackhole rules, before
	// the main table.
	netLabCutPref = "100"
)

// netNSName is what NewNetNS accepts as a name.
var netNSName = regexp.MustCompile(`^[a-z0-9]{1,20}$`)

// NetLabUsable returns nil when this process can make a [NetLab]: it runs
// as root and `ip` (iproute2) is on PATH. Otherwise it says what is
// missing, so a test can fall back (to a TCP proxy, say) and log why.
func NetLabUsable() error {
	if os.Geteuid() != 0 {
		return errors.New("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("network namespaces need ip (iproute2) on PATH")
	}
	return nil
}

// Direction says which packets a cut drops, seen from the namespace cut.
type Direction int

const (
	// Outbound drops the namespace's packets to the peer; the peer's
	// packets still arrive.
	Outbound Direction = iota + 1
	// Inbound drops the peer's packets to the namespace; its own still
	// reach the peer.
	Inbound
	// BothWays drops both: a partition between the two.
	BothWays
)

// String names the direction.
func (d Direction) String() string {
	switch d {
	case Outbound:
		return "outbound"
	case Inbound:
		return "inbound"
	case BothWays:
		return "both ways"
	}
	return "Direction(" + strconv.Itoa(int(d)) + ")"
}

// NetLab is a private IPv4 network of Linux network namespaces for one
// test: a hub namespace that routes between the others, a link from the
// root namespace (where the test runs) to the hub, and a namespace per
// [NetLab.NewNetNS], each with a veth pair to the hub. Processes run in a
// namespace with [NetNS.Command] and talk to each other, and the test to
// them, by their IP addresses; a cut is a blackhole rule in the hub's
// routing policy, so a partition drops packets silently in the network,
// as a failed switch would, with nothing changed in the processes'
// own namespaces: connects hang, sends vanish, nothing is refused.
//
// Lab n uses 10.254.n.0/24 and names starting "pdt<n>"; an index is taken
// with a lock file (flock) in os.TempDir() while the lab lives, so labs of
// parallel tests and processes never meet. When the test ends every
// namespace is deleted (kill the processes in them first: cleanups run
// last-in first-out, so anything started after NewNetLab with its own
// Cleanup is); leftovers of a run that crashed are deleted by the next
// NewNetLab. Its methods are safe for concurrent use.
type NetLab struct {
	// RootIP is the root namespace's address in the lab: the test's own
	// connections to a namespace come from it.
	RootIP string

	index  int
	hub    string
	subnet string // "10.254.n"
	lock   *os.File

	mu    sync.Mutex
	nss   []*NetNS
	rules map[string]bool // active blackhole rules, "from to"
}

// NetNS is one namespace of a [NetLab].
type NetNS struct {
	// Name is the namespace's name for `ip netns` ("pdt<n>-<name>").
	Name string
	// IP is its address; processes in it connect from it, and listen on it.
	IP string

	lab *NetLab
}

// NewNetLab makes a lab (see [NetLab]) and deletes it when the test ends.
// It fails the test when namespaces cannot be made: call [NetLabUsable]
// first to fall back instead.
func NewNetLab(tb testing.TB) *NetLab {
	tb.Helper()
	if err := NetLabUsable(); err != nil {
		tb.Fatalf("testsupport: NewNetLab: %v", err)
	}
	dir := filepath.Join(os.TempDir(), "playerdata-netlab")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatalf("testsupport: NewNetLab: %v", err)
	}
	sweepNetLabs(dir)
	l := &NetLab{rules: make(map[string]bool)}
	for n := range netLabLabs {
		f, ok := tryLock(filepath.Join(dir, strconv.Itoa(n)+".lock"))
		if !ok {
			continue
		}
		if out, _ := exec.Command("ip", "-o", "addr").CombinedOutput(); strings.Contains(string(out), fmt.Sprintf(" 10.254.%d.", n)) {
			f.Close() // the machine uses this subnet itself
			continue
		}
		l.index, l.lock = n, f
		break
	}
	if l.lock == nil {
		tb.Fatalf("testsupport: NewNetLab: all %d labs are in use", netLabLabs)
	}
	l.subnet = fmt.Sprintf("10.254.%d", l.index)
	l.hub = l.prefix() + "-hub"
	l.RootIP = l.subnet + ".2"
	tb.Cleanup(l.delete)
	if err := l.build(); err != nil {
		tb.Fatalf("testsupport: NewNetLab: %v", err)
	}
	return l
}

func (l *NetLab) prefix() string { return netLabPrefix + strconv.Itoa(l.index) }

// build makes the hub, with forwarding on and reverse-path filtering off
// (a one-way cut must not turn into two), and the root namespace's link.
func (l *NetLab) build() error {
	root, hubEnd := l.prefix()+"r", l.prefix()+"h0"
	return runIPs(
		[]string{"netns", "add", l.hub},
		[]string{"-n", l.hub, "link", "set", "lo", "up"},
		[]string{"netns", "exec", l.hub, "sysctl", "-qw", "net.ipv4.ip_forward=1",
			"net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0"},
		[]string{"link", "add", root, "type", "veth", "peer", "name", hubEnd, "netns", l.hub},
		[]string{"-n", l.hub, "addr", "add", l.subnet + ".1/30", "dev", hubEnd},
		[]string{"-n", l.hub, "link", "set", hubEnd, "up"},
		[]string{"addr", "add", l.RootIP + "/30", "dev", root},
		[]string{"link", "set", root, "up"},
		[]string{"route", "add", l.subnet + ".0/24", "via", l.subnet + ".1", "dev", root},
	)
}

// NewNetNS makes a namespace named name (lower-case letters and digits)
// with a veth pair to the hub and a default route through it, and returns
// it; it is deleted with the lab.
func (l *NetLab) NewNetNS(tb testing.TB, name string) *NetNS {
	tb.Helper()
	if !netNSName.MatchString(name) {
		tb.Fatalf("testsupport: NewNetNS(%q): want 1 to 20 lower-case letters or digits", name)
	}
	l.mu.Lock()
	k := len(l.nss) + 1
	if k > netLabNamespaces {
		l.mu.Unlock()
		tb.Fatalf("testsupport: NewNetNS: a lab holds %d namespaces", netLabNamespaces)
	}
	n := &NetNS{Name: l.prefix() + "-" + name, IP: fmt.Sprintf("%s.%d", l.subnet, 4*k+2), lab: l}
	l.nss = append(l.nss, n)
	l.mu.Unlock()
	hubEnd, nsEnd := fmt.Sprintf("%sh%d", l.prefix(), k), fmt.Sprintf("%sn%d", l.prefix(), k)
	gw := fmt.Sprintf("%s.%d", l.subnet, 4*k+1)
	err := runIPs(
		[]string{"netns", "add", n.Name},
		[]string{"-n", n.Name, "link", "set", "lo", "up"},
		[]string{"-n", l.hub, "link", "add", hubEnd, "type", "veth", "peer", "name", nsEnd, "netns", n.Name},
		[]string{"-n", l.hub, "addr", "add", gw + "/30", "dev", hubEnd},
		[]string{"-n", l.hub, "link", "set", hubEnd, "up"},
		[]string{"-n", n.Name, "addr", "add", n.IP + "/30", "dev", nsEnd},
		[]string{"-n", n.Name, "link", "set", nsEnd, "up"},
		[]string{"-n", n.Name, "route", "add", "default", "via", gw},
	)
	if err != nil {
		tb.Fatalf("testsupport: NewNetNS(%q): %v", name, err)
	}
	return n
}

// Command returns a command that runs name with args inside the namespace
// (`ip netns exec`, which execs in place: the process's id is the
// program's, so signals reach it directly). The caller starts and ends it.
func (n *NetNS) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command("ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
	dieWithParent(cmd)
	return cmd
}

// Cut drops packets between the namespace and the address peer (another
// namespace's IP, or the lab's RootIP) in direction dir, until Heal. Cutting
// what is cut already does nothing.
func (n *NetNS) Cut(tb testing.TB, peer string, dir Direction) {
	tb.Helper()
	for _, r := range n.rulesFor(peer, dir) {
		if err := n.lab.setRule(r, true); err != nil {
			tb.Fatalf("testsupport: cut %s from %s (%v): %v", n.Name, peer, dir, err)
		}
	}
}

// Heal undoes Cut in direction dir (BothWays undoes every cut between the
// two). Healing what is not cut does nothing.
func (n *NetNS) Heal(tb testing.TB, peer string, dir Direction) {
	tb.Helper()
	for _, r := range n.rulesFor(peer, dir) {
		if err := n.lab.setRule(r, false); err != nil {
			tb.Fatalf("testsupport: heal %s and %s (%v): %v", n.Name, peer, dir, err)
		}
	}
}

// rulesFor is the hub rules ("from to") a cut in dir needs.
func (n *NetNS) rulesFor(peer string, dir Direction) []string {
	out, in := n.IP+" "+peer, peer+" "+n.IP
	switch dir {
	case Outbound:
		return []string{out}
	case Inbound:
		return []string{in}
	case BothWays:
		return []string{out, in}
	}
	return nil
}

// setRule adds (on) or deletes the hub's blackhole rule for "from to".
func (l *NetLab) setRule(rule string, on bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rules[rule] == on {
		return nil
	}
	from, to, _ := strings.Cut(rule, " ")
	verb := "del"
	if on {
		verb = "add"
	}
	if err := runIP("-n", l.hub, "rule", verb, "pref", netLabCutPref, "from", from+"/32", "to", to+"/32", "blackhole"); err != nil {
		return err
	}
	l.rules[rule] = on
	return nil
}

// delete removes every namespace of the lab (the veth pairs and the root
// namespace's route go with them) and frees its index.
func (l *NetLab) delete() {
	l.mu.Lock()
	names := []string{l.hub}
	for _, n := range l.nss {
		names = append(names, n.Name)
	}
	l.mu.Unlock()
	for _, name := range names {
		_ = runIP("netns", "del", name)
	}
	_ = runIP("link", "del", l.prefix()+"r") // gone with the hub, unless the hub never got its end
	l.lock.Close()
}

// sweepNetLabs deletes the namespaces and root links of labs whose lock
// nobody holds: what a test binary that was killed left behind.
func sweepNetLabs(dir string) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	links, _ := exec.Command("ip", "-o", "link").Output()
	stale := map[int]bool{}
	for _, s := range append(regexp.MustCompile(`(?m)^`+netLabPrefix+`(\d+)-`).FindAllStringSubmatch(string(out), -1),
		regexp.MustCompile(`: `+netLabPrefix+`(\d+)r[@:]`).FindAllStringSubmatch(string(links), -1)...) {
		n, _ := strconv.Atoi(s[1])
		stale[n] = true
	}
	for n := range stale {
		f, ok := tryLock(filepath.Join(dir, strconv.Itoa(n)+".lock"))
		if !ok {
			continue // a live lab
		}
		l := &NetLab{index: n, hub: fmt.Sprintf("%s%d-hub", netLabPrefix, n), lock: f}
		for _, m := range regexp.MustCompile(`(?m)^(`+l.prefix()+`-[a-z0-9]+)`).FindAllStringSubmatch(string(out), -1) {
			if m[1] != l.hub {
				l.nss = append(l.nss, &NetNS{Name: m[1]})
			}
		}
		l.delete()
	}
}

// tryLock opens path and takes an exclusive flock on it without waiting;
// it reports false when another open file holds it. The lock lasts until
// the file is closed or the process exits.
func tryLock(path string) (*os.File, bool) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return f, true
}

// runIPs runs each `ip` command in order, stopping at the first failure.
func runIPs(cmds ...[]string) error {
	for _, args := range cmds {
		if err := runIP(args...); err != nil {
			return err
		}
	}
	return nil
}

// runIP runs `ip args...` and returns its output with the error.
func runIP(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
