package testsupport

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

const (
	// natsClusterReadyWithin bounds every wait of a NATSCluster: for a node
	// to answer, for the routes to form, for interest to spread. Each takes
	// milliseconds; this only catches a cluster that never forms.
	natsClusterReadyWithin = 10 * time.Second
	// natsClusterPoll is the pause between monitoring probes.
	natsClusterPoll = 10 * time.Millisecond
	// natsClusterSpawnAttempts is how many sets of free ports a start
	// tries: another process may take one between our probe and the bind.
	natsClusterSpawnAttempts = 5
	// natsReconnectWait is the reconnect wait of Connect's connections,
	// short so a test does not wait long for a fail-over.
	natsReconnectWait = 20 * time.Millisecond
	// natsLogTail is how many log lines a failure report shows.
	natsLogTail = 40
)

// NATSCluster is a NATS cluster of nats-server processes routed to each
// other, for one test. Make it with [StartNATSCluster]. Node i keeps its
// ports (client, cluster, monitoring) for the whole test, across Kill and
// Restart. Its methods are safe for concurrent use.
//
// A connection made with Connect can tell where it is now:
// nc.ConnectedUrl() is the client URL of its node (one of URLs) and
// [NATSCluster.NodeOf] the node's index.
type NATSCluster struct {
	// URLs are the client URLs, "nats://127.0.0.1:port"; URLs[i] is node i.
	URLs []string

	binary string
	http   *http.Client // monitoring probes, no keep-alive
	nodes  []*natsNode
}

// natsNode is one nats-server of a NATSCluster.
type natsNode struct {
	index                    int
	name                     string // server_name, unique to this test
	dir                      string
	logPath                  string
	client, cluster, monitor int // ports

	mu   sync.Mutex
	proc *osProc // nil while killed
	id   string  // server_id of the running process
}

// StartNATSCluster starts n nats-server processes (n >= 1) on 127.0.0.1,
// each with a client, a cluster and a monitoring (-m) port of its own, and
// explicit routes to all the others. Nodes start one after the other, each
// once the previous answers /healthz, which checks that its route listener
// is up (nats-server 2.15 source; observed with 2.9), so every route is made
// at the first attempt rather than on nats-server's retry a second later. It returns once every node's
// /routez names each other node exactly as a route peer (by server id, so
// it holds whether or not the server pools routes): 0.1 to 0.2 s for three
// nodes. Everything stops when the test ends; the servers' logs are shown
// when the test failed. It skips the test when nats-server is not on PATH,
// and never uses NATS_URL.
func StartNATSCluster(tb testing.TB, n int) *NATSCluster {
	tb.Helper()
	binary := lookPathOrSkip(tb, "nats-server", "StartNATSCluster")
	if n < 1 {
		tb.Fatalf("testsupport: StartNATSCluster(%d): need at least one node", n)
	}
	c := &NATSCluster{
		binary: binary,
		http:   &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
	}
	tb.Cleanup(c.http.CloseIdleConnections)
	tag := newNamespace(tb)[1:9]
	for i := range n {
		nd := &natsNode{index: i, name: fmt.Sprintf("n%d-%s", i, tag), dir: tb.TempDir()}
		nd.logPath = filepath.Join(nd.dir, "nats-server.log")
		c.nodes = append(c.nodes, nd)
	}
	tb.Cleanup(func() {
		for _, nd := range c.nodes {
			nd.kill()
			if tb.Failed() {
				tb.Logf("testsupport: %s", nd.logTail())
			}
		}
	})
	var errs []error
	for range natsClusterSpawnAttempts {
		err := c.startAll()
		if err == nil {
			break
		}
		errs = append(errs, err)
		for _, nd := range c.nodes {
			nd.kill()
		}
	}
	if len(errs) == natsClusterSpawnAttempts {
		tb.Fatalf("testsupport: start NATS cluster: %v", errors.Join(errs...))
	}
	if err := c.waitMesh(); err != nil {
		tb.Fatalf("testsupport: NATS cluster routes: %v", err)
	}
	return c
}

// startAll picks fresh ports for every node and starts them in order.
func (c *NATSCluster) startAll() error {
	ports, err := distinctFreePorts(3 * len(c.nodes))
	if err != nil {
		return fmt.Errorf("find free ports: %w", err)
	}
	c.URLs = c.URLs[:0]
	for i, nd := range c.nodes {
		nd.client, nd.cluster, nd.monitor = ports[3*i], ports[3*i+1], ports[3*i+2]
		c.URLs = append(c.URLs, "nats://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(nd.client)))
	}
	for _, nd := range c.nodes {
		if err := c.start(nd); err != nil {
			return err
		}
	}
	return nil
}

// start starts nd on its ports and waits until it answers as itself and
// its listeners are up.
func (c *NATSCluster) start(nd *natsNode) error {
	args := []string{
		"-a", "127.0.0.1",
		"-p", strconv.Itoa(nd.client),
		"-m", strconv.Itoa(nd.monitor),
		"-n", nd.name,
		"--cluster_name", "testsupport",
		"--cluster", "nats://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(nd.cluster)),
	}
	var routes []string
	for _, other := range c.nodes {
		if other != nd {
			routes = append(routes, "nats://"+net.JoinHostPort("127.0.0.1", strconv.Itoa(other.cluster)))
		}
	}
	if len(routes) > 0 {
		args = append(args, "--routes", strings.Join(routes, ","))
	}
	proc, err := startOSProc(c.binary, nd.dir, nd.logPath, args...)
	if err != nil {
		return fmt.Errorf("node %d: %w", nd.index, err)
	}
	id, err := c.waitNodeReady(nd, proc)
	if err != nil {
		proc.kill()
		return fmt.Errorf("node %d: %w\n%s", nd.index, err, nd.logTail())
	}
	nd.mu.Lock()
	nd.proc, nd.id = proc, id
	nd.mu.Unlock()
	return nil
}

// waitNodeReady polls nd's monitoring port until /varz names our server
// (so another server on that port is not taken for ours) and /healthz says
// its listeners are up, and returns its server id.
func (c *NATSCluster) waitNodeReady(nd *natsNode, proc *osProc) (string, error) {
	deadline := time.Now().Add(natsClusterReadyWithin)
	var last error
	for {
		var varz struct {
			ID   string `json:"server_id"`
			Name string `json:"server_name"`
		}
		var health struct {
			Status string `json:"status"`
		}
		err := c.get(nd, "/varz", &varz)
		if err == nil && varz.Name != nd.name {
			err = fmt.Errorf("monitoring port %d is held by server %q", nd.monitor, varz.Name)
		}
		if err == nil {
			err = c.get(nd, "/healthz", &health)
		}
		if err == nil && health.Status == "ok" {
			return varz.ID, nil
		}
		last = err
		if proc.exited() {
			return "", fmt.Errorf("nats-server exited before it was ready (port taken?): %v", last)
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("not ready within %v: %v", natsClusterReadyWithin, last)
		}
		time.Sleep(natsClusterPoll)
	}
}

// get fetches the monitoring endpoint path of nd and decodes its JSON into v.
func (c *NATSCluster) get(nd *natsNode, path string, v any) error {
	resp, err := c.http.Get("http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(nd.monitor)) + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	return json.Unmarshal(body, v)
}

// routez is the part of /routez?subs=1 the cluster reads.
type routez struct {
	Routes []struct {
		RemoteID string   `json:"remote_id"`
		Subs     []string `json:"subscriptions_list"`
	} `json:"routes"`
}

// waitMesh waits until every running node has a route to every other
// running node and to no other server.
func (c *NATSCluster) waitMesh() error {
	deadline := time.Now().Add(natsClusterReadyWithin)
	for {
		err := c.checkMesh()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not meshed within %v: %v", natsClusterReadyWithin, err)
		}
		time.Sleep(natsClusterPoll)
	}
}

// checkMesh returns nil when every running node's route peers are exactly
// the other running nodes.
func (c *NATSCluster) checkMesh() error {
	ids := map[int]string{}
	for _, nd := range c.nodes {
		if id := nd.serverID(); id != "" {
			ids[nd.index] = id
		}
	}
	for i := range ids {
		var rz routez
		if err := c.get(c.nodes[i], "/routez", &rz); err != nil {
			return fmt.Errorf("node %d: %w", i, err)
		}
		got := map[string]bool{}
		for _, r := range rz.Routes {
			got[r.RemoteID] = true
		}
		want := map[string]bool{}
		for j, id := range ids {
			if j != i {
				want[id] = true
			}
		}
		if !maps.Equal(got, want) {
			return fmt.Errorf("node %d has routes to %v, want %v", i, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
		}
	}
	return nil
}

// Connect opens a connection that tries node i first and the other nodes,
// in order, after it (so a test can put game server A on node 0 and B on
// node 1), named after the test and closed when the test ends. When its
// node dies it reconnects to another at once (reconnect wait 20 ms, no
// jitter, no limit on attempts) and nats.go resubscribes its
// subscriptions there. opts apply after these defaults. If node i is down
// it starts on the next node; nc.ConnectedUrl() or NodeOf says where it is.
func (c *NATSCluster) Connect(tb testing.TB, i int, opts ...nats.Option) *nats.Conn {
	tb.Helper()
	urls := append(slices.Clone(c.URLs[i:]), c.URLs[:i]...)
	opts = append([]nats.Option{
		nats.Name(fmt.Sprintf("%s node %d", tb.Name(), i)),
		nats.DontRandomize(),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(natsReconnectWait),
		nats.ReconnectJitter(0, 0),
		nats.Timeout(time.Second),
	}, opts...)
	nc, err := nats.Connect(strings.Join(urls, ","), opts...)
	if err != nil {
		tb.Fatalf("testsupport: connect to NATS node %d (%s): %v", i, c.URLs[i], err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// NodeOf returns the index of the node nc is connected to now, or -1 while
// it is not connected (or to a server outside the cluster).
func (c *NATSCluster) NodeOf(nc *nats.Conn) int {
	addr := nc.ConnectedAddr()
	for i, nd := range c.nodes {
		if addr == net.JoinHostPort("127.0.0.1", strconv.Itoa(nd.client)) {
			return i
		}
	}
	return -1
}

// Kill kills node i with SIGKILL, reaps it, and returns once every other
// running node has dropped its routes to it, so the interest it carried is
// gone. Connections on it see their connection drop and reconnect to
// another node. Killing a killed node does nothing.
func (c *NATSCluster) Kill(tb testing.TB, i int) {
	tb.Helper()
	c.nodes[i].kill()
	if err := c.waitMesh(); err != nil {
		tb.Fatalf("testsupport: after killing NATS node %d: %v", i, err)
	}
}

// Restart starts node i again on the same ports (killing it first if it
// runs, as a crash would) and returns once it is routed to every other
// running node. It has a new server id and no subscriptions; connections
// come back to it only when their own node fails.
func (c *NATSCluster) Restart(tb testing.TB, i int) {
	tb.Helper()
	nd := c.nodes[i]
	nd.kill()
	deadline := time.Now().Add(natsClusterReadyWithin)
	for {
		err := c.start(nd)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("testsupport: restart NATS node %d: %v", i, err)
		}
		time.Sleep(natsClusterPoll) // a port of the old process may still be held
	}
	if err := c.waitMesh(); err != nil {
		tb.Fatalf("testsupport: after restarting NATS node %d: %v", i, err)
	}
}

// WaitInterest returns once node i would deliver a message published on
// subject to a subscriber: one of its own clients subscribes to a matching
// subject (/subsz), or a route peer has told it of one (/routez?subs=1).
// Interest spreads between nodes asynchronously, so a test publishing on
// one node to a subscriber on another calls this first; a Flush of the
// subscriber's connection only covers its own node.
func (c *NATSCluster) WaitInterest(tb testing.TB, i int, subject string) {
	tb.Helper()
	nd := c.nodes[i]
	deadline := time.Now().Add(natsClusterReadyWithin)
	for {
		ok, err := c.hasInterest(nd, subject)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("testsupport: NATS node %d has no interest in %q within %v (last error: %v)", i, subject, natsClusterReadyWithin, err)
		}
		time.Sleep(natsClusterPoll)
	}
}

// hasInterest reports whether nd knows a subscriber matching subject.
func (c *NATSCluster) hasInterest(nd *natsNode, subject string) (bool, error) {
	var local struct {
		Total int `json:"total"`
	}
	if err := c.get(nd, "/subsz?subs=1&test="+url.QueryEscape(subject), &local); err != nil {
		return false, err
	}
	if local.Total > 0 {
		return true, nil
	}
	var rz routez
	if err := c.get(nd, "/routez?subs=1", &rz); err != nil {
		return false, err
	}
	for _, r := range rz.Routes {
		for _, s := range r.Subs {
			pattern, _, _ := strings.Cut(s, " ") // "subject queue" for queue subscriptions
			if subjectMatches(pattern, subject) {
				return true, nil
			}
		}
	}
	return false, nil
}

// subjectMatches reports whether the literal subject matches pattern, which
// may hold the wildcards "*" (one token) and ">" (one or more tokens).
func subjectMatches(pattern, subject string) bool {
	pt, st := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, p := range pt {
		switch {
		case p == ">":
			return len(st) > i
		case i >= len(st):
			return false
		case p != "*" && p != st[i]:
			return false
		}
	}
	return len(pt) == len(st)
}

// serverID returns the server id of the running process, or "" while
// killed.
func (nd *natsNode) serverID() string {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.id
}

// kill sends SIGKILL and reaps the process; killing a killed node does
// nothing.
func (nd *natsNode) kill() {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.proc != nil {
		nd.proc.kill()
		nd.proc, nd.id = nil, ""
	}
}

// logTail returns the end of the node's log, for failure messages.
func (nd *natsNode) logTail() string {
	return fmt.Sprintf("nats-server node %d log %s:\n%s", nd.index, nd.logPath, tailFile(nd.logPath, natsLogTail))
}

// distinctFreePorts returns n different TCP ports that were free on
// 127.0.0.1 a moment ago: all are held open until all are found.
func distinctFreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
