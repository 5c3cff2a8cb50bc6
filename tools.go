//go:build tools

// Package tools pins the chosen dependencies that not every package imports
// yet, so `go mod tidy` keeps them in go.mod for the whole team.
package tools

import (
	_ "github.com/asynkron/protoactor-go/actor"
	_ "github.com/fasthttp/router"
	_ "github.com/fasthttp/websocket"
	_ "github.com/fxamacker/cbor/v2"
	_ "github.com/hashicorp/golang-lru/v2"
	_ "github.com/miekg/dns"
	_ "github.com/prometheus/common/expfmt"
	_ "github.com/quic-go/quic-go"
	_ "github.com/shirou/gopsutil/v3/cpu"
	_ "github.com/tidwall/buntdb"
	_ "github.com/valyala/fasthttp"
)
