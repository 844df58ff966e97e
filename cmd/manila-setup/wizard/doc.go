// Package wizard is the interactive wizard behind `manila-setup networks attach`: it attaches the
// workers of a running cluster to the network Manila exports on, in seven screens (connect,
// storage network, security groups, MachineSets, review, apply and roll, verify).
//
// It follows the Elm architecture of bubbletea: one screen per step, each behind the screen
// interface (screen.go) and given the same session; keys are bubbles/key Bindings from which
// the key line and the help are drawn (keys.go). Every read or write of the cloud and the
// cluster is a tea.Cmd that calls the Backend and returns a message, and Update only turns
// messages into state, so the screens are tested by feeding them messages.
// The Backend used by the command (NewLiveBackend) is built on internal/openstack and the
// workers use case, the same code as the flag-driven commands.
package wizard
