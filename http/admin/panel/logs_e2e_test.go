package panel_test

import (
	"testing"

	"peerdns/internal/testutil"
)

func TestPanelLogs(t *testing.T) {
	b := newBrowser(t)
	n := startNode(t, "")
	base := "http://" + n.AdminAddr()
	b.open(t, base, "logs")
	view := `#log-view`

	// The snapshot of the core channel, then live lines.
	b.waitText(t, view, "starting node")
	testutil.AddDomain(t, base, "tail.p2p", testutil.Hash('a'))
	b.waitText(t, view, "tail.p2p")

	// Pause holds new lines; resume shows them.
	b.clickText(t, `#tab-logs`, "Pause")
	testutil.AddDomain(t, base, "held.p2p", testutil.Hash('b'))
	b.waitText(t, `#tab-logs .help`, "new line(s) held")
	if eval[bool](t, b, `document.querySelector('#log-view').innerText.includes('held.p2p')`) {
		t.Fatal("a paused tail showed a new line")
	}
	b.clickText(t, `#tab-logs`, "Resume")
	b.waitText(t, view, "held.p2p")

	// The filter narrows the lines.
	b.fill(t, `#tab-logs input[name=filter]`, "held.p2p")
	b.waitJS(t, `!document.querySelector('#log-view').innerText.includes('tail.p2p') && document.querySelector('#log-view').innerText.includes('held.p2p')`)
	b.fill(t, `#tab-logs input[name=filter]`, "")

	// Another channel: its own snapshot.
	b.choose(t, `#tab-logs select[name=channel]`, "dns")
	b.waitText(t, view, "dns server started")
	b.screenshot(t, "logs")
	b.noReload(t)
	b.checkErrors(t)
}
