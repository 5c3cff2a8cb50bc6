package logchan

import (
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/internal/testutil"
	"peerdns/messages"
)

// A write that a full disk cut short leaves part of a line in the file;
// the first line written once there is space again starts a line of its
// own instead of going on from that part, so it keeps its fields.
func TestDiskFullLeavesNoHalfLineBeforeTheNext(t *testing.T) {
	disk := testutil.SmallDisk(t, "1m")
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	pid := sys.Root.Spawn(Props("core", disk.Dir))
	tail := func() []string {
		t.Helper()
		res, err := sys.Root.RequestFuture(pid, &messages.GetLogTail{Lines: 3}, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		r := res.(*messages.GetLogTailReply)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		return r.Lines
	}
	sys.Root.Send(pid, &messages.LogLine{Channel: "core", Level: "INFO", Time: time.Now(), Message: "first"})
	if got := tail(); len(got) != 1 || got[0] != "first" {
		t.Fatalf("tail = %q", got)
	}
	disk.Fill()
	// Bigger than what is left of the file's last page: part of it is
	// written, the rest fails.
	b := messages.NewLogBatch("core", "INFO")
	for range 100 {
		b.Text = append(b.Text, strings.Repeat("x", 99)...)
		b.EndLine(time.Now())
	}
	sys.Root.Send(pid, b)
	tail() // the batch was handled
	disk.Free()
	sys.Root.Send(pid, &messages.LogLine{Channel: "core", Level: "INFO", Time: time.Now(), Message: "time=now level=INFO msg=after"})
	got := tail()
	if len(got) == 0 || got[len(got)-1] != "time=now level=INFO msg=after" {
		t.Fatalf("last line after the disk had space again = %.80q…, want the line as it was sent", got[len(got)-1])
	}
}
