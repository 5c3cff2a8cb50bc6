// Package settings is the actor that owns the node's settings: the
// whitelist (Catalog: each entry's type, category, label, description,
// default, validator, and whether a change applies live or at the next
// start), the saved values in node.db (keys "settings:<NAME>") and the
// live application of those that can change while the node runs.
//
// # Precedence
//
// At start a setting's value is, first found: the command-line flag, the
// environment variable (Def.Env), the value saved here, the default. The
// node applies the saved values to its Config before anything starts
// (ApplySaved, through the Fields the node hands over: fields.go). A
// setting given by a flag or the environment cannot be changed here
// (update-settings names it in its errors): the deployment that set it
// is authoritative, and a saved value would be silently overridden at the
// next start.
//
// # Updates
//
// update-settings validates the whole request first; any unknown name,
// read-only setting, pinned setting or bad value is one entry of Errors
// and nothing changes, and so does a request after which ADMIN_DOMAIN
// and PROFILE_DOMAIN would be the same name, or after which SUBNET_BASE
// and INITIAL_IP_INDEX would make a default subnet with no address to
// hand out. Otherwise every value is saved in one transaction
// (SUBNETS goes to the ledger actor, which owns the subnets; if that
// fails the saved values are put back), the live ones are applied
// (Deps.Apply), and the reply lists the ones that need a restart. Each
// successful update publishes the update-settings hint. Updates run one
// at a time, in the order they came: one that comes while another waits
// for the ledger waits too, so the values that run are those saved. An
// update whose turn comes after its Deadline (the asker gave up) changes
// nothing, and the ledger is asked no longer than until the Deadline, so
// a client answered "failed" does not find its values saved later (a
// ledger that gets to SetSubnets after the ask timed out may still apply
// the subnets: they are the ledger's).
//
// It must never: block Receive on the network (the ledger is asked with
// ReenterAfter), or change a value it did not validate.
package settings

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"peerdns/internal/ipam"
	"peerdns/internal/store"
	"peerdns/messages"
)

// Prefix is the node.db key prefix of saved settings.
const Prefix = "settings:"

// Deps are what the actor needs from the node.
type Deps struct {
	Store *store.DB // node.db
	// InForce are the values the node started with, by name, and Sources
	// where each came from ("flag", "env", "saved", "default").
	InForce map[string]string
	Sources map[string]string
	// Apply has a function for each live setting; it gets the new,
	// validated value.
	Apply map[string]func(string) error
	// Ledger owns SUBNETS (messages.GetSubnets / SetSubnets); nil: the
	// setting is listed from InForce only and cannot change.
	Ledger *actor.PID
	// Internal lists the internal domains (INTERNAL_DOMAINS).
	Internal func() []string
	Timeout  time.Duration // asking the ledger [5s]
	Log      *slog.Logger
}

// Props builds the actor.
func Props(d Deps) *actor.Props {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Timeout <= 0 {
		d.Timeout = 5 * time.Second
	}
	return actor.PropsFromProducer(func() actor.Actor { return &Actor{d: d} })
}

// Actor owns the saved settings.
type Actor struct {
	d     Deps
	saved map[string]string // the values saved here
	// waiting: an update is waiting for the ledger (SUBNETS). Updates
	// that come meanwhile wait in queued and run after it, in order, so
	// one never saves or applies its values in the middle of another.
	waiting bool
	queued  []queuedUpdate
}

// queuedUpdate is an update that came while another waited.
type queuedUpdate struct {
	sender *actor.PID
	req    *messages.UpdateSettings
}

// Receive handles one message.
func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		saved, err := LoadSaved(a.d.Store)
		if err != nil {
			a.d.Log.Error("cannot read the saved settings", "err", err)
		}
		a.saved = saved
	case *messages.GetSettings:
		a.get(c)
	case *messages.UpdateSettings:
		if a.waiting {
			a.queued = append(a.queued, queuedUpdate{c.Sender(), m})
			return
		}
		a.update(c, c.Sender(), m)
	}
}

// LoadSaved reads the saved settings (a missing store: none).
func LoadSaved(db *store.DB) (map[string]string, error) {
	out := map[string]string{}
	if db == nil {
		return out, nil
	}
	kvs, err := db.List(Prefix)
	if err != nil {
		return out, err
	}
	for _, kv := range kvs {
		out[strings.TrimPrefix(kv.Key, Prefix)] = kv.Value
	}
	return out, nil
}

// value is what GET lists for a setting other than SUBNETS: the saved
// value when there is one and nothing pins it, else the value in force.
func (a *Actor) value(d Def) string {
	if d.Name == InternalDomains && a.d.Internal != nil {
		ds := a.d.Internal()
		sort.Strings(ds)
		return strings.Join(ds, ",")
	}
	if v, ok := a.saved[d.Name]; ok && !a.pinned(d.Name) {
		return v
	}
	if v, ok := a.d.InForce[d.Name]; ok {
		return v
	}
	return d.Default
}

func (a *Actor) pinned(name string) bool {
	s := a.d.Sources[name]
	return s == "flag" || s == "env"
}

func (a *Actor) source(name string) string {
	if s := a.d.Sources[name]; s != "" {
		return s
	}
	return "default"
}

func (a *Actor) get(c actor.Context) {
	rep := &messages.GetSettingsReply{Settings: map[string]string{}, Metadata: map[string]messages.SettingMeta{}}
	for _, d := range Catalog {
		v := a.value(d)
		meta := d.Meta(a.source(d.Name))
		if !d.Live && !d.ReadOnly && d.Name != Subnets {
			if now, ok := a.d.InForce[d.Name]; ok && now != v {
				meta.RestartPending = true
			}
		}
		rep.Settings[d.Name] = v
		rep.Metadata[d.Name] = meta
	}
	if a.d.Ledger == nil {
		c.Respond(rep)
		return
	}
	sender := c.Sender()
	f := c.RequestFuture(a.d.Ledger, &messages.GetSubnets{}, a.d.Timeout)
	c.ReenterAfter(f, func(res any, err error) {
		if r, ok := res.(*messages.GetSubnetsReply); ok && err == nil {
			rep.Settings[Subnets] = subnetsJSON(r.Subnets)
		} else {
			rep.Err = fmt.Errorf("subnets: the ledger did not answer: %v", err)
		}
		c.Send(sender, rep)
	})
}

// subnetsJSON is the SUBNETS value: the subnets as the spec's JSON array
// string (the fields a client sets, not the usage counters).
func subnetsJSON(list []messages.Subnet) string {
	type in struct {
		Base       string `json:"base"`
		CIDR       int    `json:"cidr"`
		StartIndex int    `json:"startIndex"`
		Name       string `json:"name,omitempty"`
	}
	out := make([]in, 0, len(list))
	for _, s := range list {
		out = append(out, in{s.Base, s.CIDR, s.StartIndex, s.Name})
	}
	b, _ := json.Marshal(out) // plain structs
	return string(b)
}

// check validates a whole request: one error per problem.
func (a *Actor) check(req map[string]string) []string {
	var errs []string
	names := make([]string, 0, len(req))
	for n := range req {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return []string{"settings: nothing to change (want an object of setting names to values)"}
	}
	for _, n := range names {
		d, ok := Lookup(n)
		if !ok {
			errs = append(errs, fmt.Sprintf("%s: not a setting (GET /api/settings lists them)", n))
			continue
		}
		if a.pinned(n) {
			errs = append(errs, fmt.Sprintf("%s is set by the %s for this node; change it there", n, map[string]string{"flag": "command line", "env": "environment"}[a.d.Sources[n]]))
			continue
		}
		if n == Subnets && a.d.Ledger == nil {
			errs = append(errs, "SUBNETS cannot be changed on this node (no ledger)")
			continue
		}
		if err := d.Validate(req[n]); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) == 0 {
		errs = append(errs, a.checkSites(req)...)
		errs = append(errs, a.checkDefaultSubnet(req)...)
	}
	return errs
}

// after is the value of setting name once req applied.
func (a *Actor) after(req map[string]string, name string) string {
	if v, ok := req[name]; ok {
		return strings.TrimSpace(v)
	}
	d, _ := Lookup(name)
	return a.value(d)
}

// checkDefaultSubnet refuses a request after which SUBNET_BASE and
// INITIAL_IP_INDEX, each valid alone, would make a default subnet with
// no address to hand out (INITIAL_IP_INDEX past its end): the node
// checks them together at start, and no domain could get a local IP.
func (a *Actor) checkDefaultSubnet(req map[string]string) []string {
	_, base := req[SubnetBase]
	_, index := req[InitialIPIndex]
	if !base && !index {
		return nil
	}
	start, _ := strconv.Atoi(a.after(req, InitialIPIndex)) // validated, or the value in force
	if _, err := ipam.DefaultSubnets(a.after(req, SubnetBase), start); err != nil {
		return []string{err.Error()}
	}
	return nil
}

// checkSites refuses a request after which ADMIN_DOMAIN and
// PROFILE_DOMAIN would name the same site: the admin panel would hold
// the name and the profile plugin's GET /api/token, which every plugin
// write needs, would be out of reach.
func (a *Actor) checkSites(req map[string]string) []string {
	after := func(name string) string {
		return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(a.after(req, name))), ".")
	}
	if admin := after(AdminDomain); admin == after(ProfileDomain) {
		return []string{fmt.Sprintf("ADMIN_DOMAIN and PROFILE_DOMAIN must differ: both would be %q, and the admin panel would hide the profile's GET /api/token", admin)}
	}
	return nil
}

// reply answers sender (nil: a Send with no one to answer).
func reply(c actor.Context, sender *actor.PID, rep *messages.UpdateSettingsReply) {
	if sender != nil {
		c.Send(sender, rep)
	}
}

// next runs the updates that queued while one waited for the ledger,
// until one waits again.
func (a *Actor) next(c actor.Context) {
	for !a.waiting && len(a.queued) > 0 {
		q := a.queued[0]
		a.queued = a.queued[1:]
		a.update(c, q.sender, q.req)
	}
}

func (a *Actor) update(c actor.Context, sender *actor.PID, m *messages.UpdateSettings) {
	req := m.Settings
	if !m.Deadline.IsZero() && !time.Now().Before(m.Deadline) {
		reply(c, sender, &messages.UpdateSettingsReply{Err: fmt.Errorf("%w: its turn came after its deadline, behind another update", messages.ErrSettingsStore)})
		return
	}
	if errs := a.check(req); len(errs) > 0 {
		reply(c, sender, &messages.UpdateSettingsReply{Errors: errs})
		return
	}
	vals := map[string]string{}
	var subnets *string
	for n, v := range req {
		d, _ := Lookup(n) // checked
		v = d.Canonical(v)
		if n == Subnets {
			subnets = &v
			continue
		}
		vals[n] = v
	}
	old := map[string]string{}
	for n := range vals {
		old[n] = a.saved[n]
	}
	if err := a.save(vals, false); err != nil {
		reply(c, sender, &messages.UpdateSettingsReply{Err: err})
		return
	}
	if subnets == nil {
		reply(c, sender, a.applied(c, vals, false))
		return
	}
	var list []messages.Subnet
	_ = json.Unmarshal([]byte(*subnets), &list) // validated in check
	wait := a.d.Timeout
	if left := time.Until(m.Deadline); !m.Deadline.IsZero() && left < wait {
		wait = max(left, time.Millisecond)
	}
	a.waiting = true
	f := c.RequestFuture(a.d.Ledger, &messages.SetSubnets{Subnets: list}, wait)
	c.ReenterAfter(f, func(res any, err error) {
		defer a.next(c)
		a.waiting = false
		if r, ok := res.(*messages.SetSubnetsReply); ok && err == nil {
			err = r.Err
		} else if err == nil {
			err = fmt.Errorf("unexpected reply %T", res)
		}
		if err != nil {
			// Put the other values back: all or nothing.
			if rerr := a.save(old, true); rerr != nil {
				a.d.Log.Error("cannot put settings back after the subnets failed", "err", rerr)
			}
			reply(c, sender, &messages.UpdateSettingsReply{Err: fmt.Errorf("%w: subnets: %w", messages.ErrSettingsStore, err)})
			return
		}
		reply(c, sender, a.applied(c, vals, true))
	})
}

// save writes vals in one transaction; when restoring (putting back
// what an update overwrote) a value "" deletes the key instead.
func (a *Actor) save(vals map[string]string, restoring bool) error {
	if a.d.Store != nil {
		err := a.d.Store.Update(func(tx *store.Tx) error {
			for n, v := range vals {
				var err error
				if restoring && v == "" {
					err = tx.Delete(Prefix + n)
				} else {
					err = tx.Set(Prefix+n, v)
				}
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("%w: %w", messages.ErrSettingsStore, err)
		}
	}
	for n, v := range vals {
		if restoring && v == "" {
			delete(a.saved, n)
		} else {
			a.saved[n] = v
		}
	}
	return nil
}

// applied applies the live settings among vals and builds the reply.
func (a *Actor) applied(c actor.Context, vals map[string]string, subnets bool) *messages.UpdateSettingsReply {
	rep := &messages.UpdateSettingsReply{}
	var failed []string
	names := make([]string, 0, len(vals))
	for n := range vals {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		d, _ := Lookup(n)
		if !d.Live {
			rep.RestartRequiredSettings = append(rep.RestartRequiredSettings, n)
			continue
		}
		if f := a.d.Apply[n]; f != nil {
			if err := f(vals[n]); err != nil {
				failed = append(failed, fmt.Sprintf("%s: %v", n, err))
				a.d.Log.Warn("setting saved but not applied", "setting", n, "err", err)
			}
		}
	}
	if subnets {
		rep.RestartRequiredSettings = append(rep.RestartRequiredSettings, Subnets)
		sort.Strings(rep.RestartRequiredSettings)
	}
	rep.RestartRequired = len(rep.RestartRequiredSettings) > 0
	rep.Message = "Settings saved and applied"
	if rep.RestartRequired {
		rep.Message = "Settings saved; restart the node to apply " + strings.Join(rep.RestartRequiredSettings, ", ")
	}
	if len(failed) > 0 {
		rep.Message += "; not applied until the next start: " + strings.Join(failed, "; ")
	}
	a.d.Log.Info("settings changed", "settings", strings.Join(names, ","), "restartRequired", rep.RestartRequiredSettings)
	c.ActorSystem().EventStream.Publish(&messages.Hint{Type: messages.HintSettings})
	return rep
}
