package localdns

// The requests and replies of this actor are in messages/localdns.go;
// these are the private ones it sends itself.

// viewChanged carries a new p2p view into the actor (from the view
// subscription, outside the actor's goroutine).
type viewChanged struct{ names map[string]bool }

// conflictChecked is the result of one public lookup.
type conflictChecked struct {
	domain   string
	publicIP string
	err      error
}

// retryCheck asks for one domain's public lookup again after a failure.
type retryCheck struct{ domain string }
