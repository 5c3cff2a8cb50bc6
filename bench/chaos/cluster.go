//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// cluster is the lab and its node processes.
type cluster struct {
	lab    *lab
	nodes  []*node
	undo   []func()
	closed bool
}

// startCluster makes the lab, starts n nodes (node 0 makes the network,
// the others join with its invites), each on a data folder that is a
// small tmpfs of its own, and waits until every node has a session with
// every other. close undoes everything, also after a failure half way.
func startCluster(ctx context.Context, prefix, work, bin string, n int) (*cluster, error) {
	lab, err := newLab(prefix, n)
	if err != nil {
		return nil, err
	}
	c := &cluster{lab: lab, nodes: make([]*node, n)}
	c.undo = append(c.undo, lab.close)
	for i := range c.nodes {
		dir := filepath.Join(work, fmt.Sprintf("node%d", i))
		data := filepath.Join(dir, "data")
		if err := os.MkdirAll(data, 0o700); err != nil {
			c.close()
			return nil, err
		}
		// The data folder is a small tmpfs of its own: the nemesis fills it.
		if err := run("mount", "-t", "tmpfs", "-o", "size=256m,mode=0700", "tmpfs", data); err != nil {
			c.close()
			return nil, err
		}
		c.undo = append(c.undo, func() { _ = run("umount", "-l", data) })
		nd := &node{i: i, lab: lab, bin: bin, dir: dir, http: lab.client(i), ctx: ctx}
		c.nodes[i] = nd
		c.undo = append(c.undo, nd.kill)
	}
	if err := c.nodes[0].start(""); err != nil {
		c.close()
		return nil, err
	}
	for i := 1; i < n; i++ {
		inv, err := c.nodes[0].invite()
		if err == nil {
			err = c.nodes[i].start(inv)
		}
		if err != nil {
			c.close()
			return nil, err
		}
	}
	if err := waitPeers(ctx, c.nodes, 60*time.Second); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// close stops every process, unmounts and deletes the namespaces, in
// the reverse order of their making.
func (c *cluster) close() {
	if c.closed {
		return
	}
	c.closed = true
	for i := len(c.undo) - 1; i >= 0; i-- {
		c.undo[i]()
	}
}

// peers is the number of peers node n has a session with (-1 when it
// does not answer).
func (n *node) peers() int {
	code, body, err := n.call("GET", "/api/peers", "")
	if err != nil || code != 200 {
		return -1
	}
	var ids []string
	if json.Unmarshal([]byte(body), &ids) != nil {
		return -1
	}
	return len(ids)
}

func waitPeers(ctx context.Context, nodes []*node, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		var short []string
		for _, n := range nodes {
			if p := n.peers(); p < len(nodes)-1 {
				short = append(short, fmt.Sprintf("node %d has %d", n.i, p))
			}
		}
		if len(short) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the nodes did not all connect within %v: %s", within, strings.Join(short, ", "))
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}
