package fleet_test

import (
	"strings"
	"testing"
	"time"

	"peerdns/agent/fleet"
	"peerdns/messages"
)

// The dimension cap bounds a child's memory only if a dimension's
// metadata is bounded too: a chart whose id, title or dimension names are
// longer than any real chart's is dropped and counted, not kept (20,000
// one-dimension charts of 1 MB titles would be 20 GB), and the batch's
// other charts are stored.
func TestParentDropsOversizedChartText(t *testing.T) {
	p := fleet.NewParent(fleet.ParentConfig{})
	defer p.Close()
	c, stop := streamTo(t, p, 10*time.Second)
	defer stop()
	long := strings.Repeat("x", 600_000)
	now := time.Now().Unix()
	b := &messages.StreamBatch{Seq: 1, Charts: []messages.StreamChart{
		{ID: "big.title", Title: long, Dims: []string{"a"}},
		{ID: "big.dim", Dims: []string{"a"}, DimNames: []string{long[:300_000]}},
		{ID: "system.ok", Title: "fine", Dims: []string{"a"}},
	}, Points: []messages.StreamPoints{
		{Chart: "big.title", Start: now, Values: [][]float64{{1}}},
		{Chart: "system.ok", Start: now, Values: [][]float64{{1}}},
	}}
	if err := messages.WriteFrame(c, b, messages.AgentMaxFrame); err != nil {
		t.Fatal(err)
	}
	var ack messages.StreamAck
	if err := messages.ReadFrame(c, &ack, messages.AgentMaxFrame); err != nil {
		t.Fatal(err)
	}
	db, _ := p.DB("k")
	for _, id := range []string{"big.title", "big.dim"} {
		if def, ok := db.Chart(id); ok {
			n := len(def.Title)
			for _, d := range def.Dims {
				n = max(n, len(d.Name))
			}
			t.Errorf("chart %s stored with a %d-byte string", id, n)
		}
	}
	if _, ok := db.Chart("system.ok"); !ok {
		t.Errorf("the batch's sane chart was not stored (ack %+v)", ack)
	}
	if ack.Error != "" || ack.Dropped < 3 {
		t.Errorf("ack %+v: want the two oversized charts and their point dropped and counted", ack)
	}
}
