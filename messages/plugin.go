package messages

import (
	"encoding/json"
	"errors"
	"net/netip"
)

// Plugin statuses.
const (
	PluginLoaded  = "loaded"
	PluginStopped = "stopped"
	PluginStatic  = "static"
)

// PluginAction is one action a plugin's manifest declares.
type PluginAction struct {
	Name        string `json:"name"`
	Label       string `json:"label"`
	Description string `json:"description"`
	Icon        string `json:"icon"`
}

// PluginSetting is one setting of a plugin with its value in force.
type PluginSetting struct {
	Type        string `json:"type"`
	Label       string `json:"label"`
	Description string `json:"description"`
	Default     any    `json:"default"`
	Value       any    `json:"value"`
}

// Plugin is the spec's Plugin resource; Error says why a stopped plugin
// is not running (a bad manifest, a crash loop), "" otherwise.
type Plugin struct {
	Domain      string                   `json:"domain"`
	Name        string                   `json:"name"`
	Version     string                   `json:"version"`
	Description string                   `json:"description"`
	Author      string                   `json:"author"`
	Homepage    string                   `json:"homepage"`
	License     string                   `json:"license"`
	Status      string                   `json:"status"`
	HasHandler  bool                     `json:"hasHandler"`
	HasWww      bool                     `json:"hasWww"`
	HasDatabase bool                     `json:"hasDatabase"`
	Actions     []PluginAction           `json:"actions"`
	Settings    map[string]PluginSetting `json:"settings"`
	Error       string                   `json:"error,omitempty"`
}

// GetPlugins lists every plugin (loaded, stopped and static).
type GetPlugins struct{}

// GetPluginsReply answers GetPlugins, sorted by domain.
type GetPluginsReply struct{ Plugins []Plugin }

// GetPlugin asks for one plugin by domain.
type GetPlugin struct{ Domain string }

// GetPluginReply answers GetPlugin; Err wraps ErrUnknownPlugin.
type GetPluginReply struct {
	Plugin Plugin
	Err    error
}

// ControlPlugin starts, stops or reloads a plugin (Op "start", "stop",
// "reload").
type ControlPlugin struct{ Domain, Op string }

// ControlPluginReply answers ControlPlugin.
type ControlPluginReply struct {
	Message string
	Err     error
}

// RescanPlugins reads DATA/plugins again: new folders become plugins,
// removed ones go away. The reply is a GetPluginsReply.
type RescanPlugins struct{}

// RunPluginAction runs an action of a plugin's handler.
type RunPluginAction struct {
	Domain, Name string
	Params       json.RawMessage // a JSON object, or nil
}

// RunPluginActionReply answers RunPluginAction.
type RunPluginActionReply struct {
	Result json.RawMessage
	Err    error
}

// SetPluginSettings validates, saves and applies a plugin's settings.
type SetPluginSettings struct {
	Domain string
	Values map[string]json.RawMessage
}

// SetPluginSettingsReply answers SetPluginSettings: Errors (one per bad
// key or value; nothing changed) or Err.
type SetPluginSettingsReply struct {
	Errors []string
	Err    error
}

// Plugin errors the admin API maps to statuses.
var (
	ErrUnknownPlugin = errors.New("no such plugin")
	ErrUnknownAction = errors.New("no such action")
	ErrBadPlugin     = errors.New("invalid plugin request")
	ErrPluginDown    = errors.New("plugin handler is not running")
)

// SetInternalDomains replaces the internal domains an owner (e.g.
// "plugins") adds beside the node's own (the admin domain); each answers
// in DNS with its address. The reply is a SetInternalDomainsReply.
type SetInternalDomains struct {
	Owner   string
	Domains map[string]netip.Addr
}

// SetInternalDomainsReply lists the domains refused and why (a p2p claim
// exists, or the node's own internal domain); the others are in force.
type SetInternalDomainsReply struct{ Refused map[string]string }

// PluginCall is the request frame of a plugin's peer.call or peer.send on
// a plugin stream (transport.StreamPlugin): the caller's plugin domain,
// the method its handler named, and the params as JSON. Wait is false for
// peer.send: the receiver answers nothing and closes.
type PluginCall struct {
	Domain string `cbor:"1,keyasint"`
	Method string `cbor:"2,keyasint"`
	Params []byte `cbor:"3,keyasint,omitempty"`
	Wait   bool   `cbor:"4,keyasint,omitempty"`
}

// PluginCallReply answers a PluginCall with Wait: the handler's result as
// JSON, or Err.
type PluginCallReply struct {
	Result []byte `cbor:"1,keyasint,omitempty"`
	Err    string `cbor:"2,keyasint,omitempty"`
}

// PluginHandleRequest is a plugin's handle call: one HTTP request.
// Headers hold the first value of each header; Body is base64 on the
// wire.
type PluginHandleRequest struct {
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Query   string            `json:"query"`
	Headers map[string]string `json:"headers"`
	Body    []byte            `json:"body"` // base64 in JSON
}

// PluginHandleResponse is a plugin handler's answer.
type PluginHandleResponse struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    []byte            `json:"body"`
}
