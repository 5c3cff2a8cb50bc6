package main

import (
	"context"
	"errors"
	"io"
)

func runAgent(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	return errors.New("agent: not wired yet")
}
