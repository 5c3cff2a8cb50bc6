package scale

import (
	"math/rand/v2"
	"slices"
)

// topology says which pairs of nodes can reach each other. adj[i] is
// sorted; nil adj means every pair (the full mesh).
type topology struct {
	n   int
	adj [][]int
	set []map[int]bool
}

func fullMesh(n int) topology { return topology{n: n} }

// sparse links each node to about degree others: a ring (so the graph is
// connected) plus random chords until every node has degree links or no
// partner with room is left. Same seed, same graph.
func sparse(n, degree int, seed uint64) topology {
	t := topology{n: n, adj: make([][]int, n), set: make([]map[int]bool, n)}
	for i := range t.set {
		t.set[i] = map[int]bool{}
	}
	link := func(a, b int) {
		if a == b || t.set[a][b] {
			return
		}
		t.set[a][b], t.set[b][a] = true, true
		t.adj[a] = append(t.adj[a], b)
		t.adj[b] = append(t.adj[b], a)
	}
	for i := 0; i < n; i++ {
		link(i, (i+1)%n)
	}
	r := rand.New(rand.NewPCG(seed, 7))
	for tries := 0; tries < n*degree*20; tries++ {
		a, b := r.IntN(n), r.IntN(n)
		if len(t.adj[a]) < degree && len(t.adj[b]) < degree {
			link(a, b)
		}
	}
	for i := range t.adj {
		slices.Sort(t.adj[i])
	}
	return t
}

// tree links node i to its parent (i-1)/k: a k-ary tree, so every pair
// of nodes has exactly one path and each writer's ops reach every node
// in order (the eager-push tree of a Plumtree-like gossip).
func tree(n, k int) topology {
	t := topology{n: n, adj: make([][]int, n), set: make([]map[int]bool, n)}
	for i := range t.set {
		t.set[i] = map[int]bool{}
	}
	for i := 1; i < n; i++ {
		p := (i - 1) / k
		t.set[i][p], t.set[p][i] = true, true
		t.adj[i] = append(t.adj[i], p)
		t.adj[p] = append(t.adj[p], i)
	}
	for i := range t.adj {
		slices.Sort(t.adj[i])
	}
	return t
}

func (t *topology) linked(a, b int) bool {
	if a == b {
		return false
	}
	if t.adj == nil {
		return true
	}
	return t.set[a][b]
}

func (t *topology) neighbours(i int) []int {
	if t.adj != nil {
		return t.adj[i]
	}
	out := make([]int, 0, t.n-1)
	for j := 0; j < t.n; j++ {
		if j != i {
			out = append(out, j)
		}
	}
	return out
}

// diameter is the longest shortest path (in hops) between two nodes.
func (t *topology) diameter() int {
	worst := 0
	for s := 0; s < t.n; s++ {
		dist := make([]int, t.n)
		for i := range dist {
			dist[i] = -1
		}
		dist[s] = 0
		q := []int{s}
		for len(q) > 0 {
			v := q[0]
			q = q[1:]
			for _, w := range t.neighbours(v) {
				if dist[w] < 0 {
					dist[w] = dist[v] + 1
					worst = max(worst, dist[w])
					q = append(q, w)
				}
			}
		}
	}
	return worst
}
