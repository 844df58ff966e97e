package openstack

import (
	"errors"
	"fmt"
)

// HasEvidence reports whether Manila itself shows that it exports on the candidate's network
// (high: export locations in its subnets; medium: a share network places share servers on it),
// rather than only a guess from the network's name (low). Only such candidates are marked as
// Manila's in listings and chosen by StorageNetwork.
func (c *Candidate) HasEvidence() bool {
	return c.Confidence == ConfidenceHigh || c.Confidence == ConfidenceMedium
}

// StorageNetworkError says why StorageNetwork chose no network.
type StorageNetworkError struct {
	// Guess is the best candidate when it rests on its name only (nil when there is none).
	Guess *Candidate
	// Tied are the equally ranked candidates with evidence, when there are two or more.
	Tied []Candidate
	// Zones are each availability zone's networks, when different zones are served by
	// different storage networks: then the choice is made zone by zone.
	Zones []ZoneNetworks
}

// ErrNoStorageNetwork matches (errors.Is) every *StorageNetworkError.
var ErrNoStorageNetwork = errors.New("the network Manila exports on is not known")

func (e *StorageNetworkError) Is(target error) bool { return target == ErrNoStorageNetwork }

func (e *StorageNetworkError) Error() string {
	switch {
	case len(e.Zones) > 0:
		return fmt.Sprintf("Manila exports on a storage network per availability zone (%s): a worker must be attached to its own zone's", ZoneSummary(e.Zones))
	case len(e.Tied) > 1:
		return fmt.Sprintf("Manila exports on %s and %s alike (same evidence, score %d): choose one",
			e.Tied[0].Network.Label(), e.Tied[1].Network.Label(), e.Tied[0].Score)
	case e.Guess != nil:
		return fmt.Sprintf("Manila shows no share export and no share network yet; %s is only a guess from its name", e.Guess.Network.Label())
	}
	return "Manila shows no share export and no share network in a network the project can see"
}

// StorageNetwork is the one rule that picks the storage network from a ranking, for every caller
// (installconfig patch --discover, the wizard's preselection, the operator's condition): the best
// candidate when it has evidence (HasEvidence) and no other candidate with evidence has the same
// score. Otherwise it returns a *StorageNetworkError (errors.Is ErrNoStorageNetwork) that says
// why: no evidence at all, only a guess from a name, or a tie; or, on a cloud of several
// availability zones served by different storage networks, the networks of each zone, since
// no one network is then right for every worker.
func (r *Ranking) StorageNetwork() (*Candidate, error) {
	if r.zonesDiffer() {
		return nil, &StorageNetworkError{Zones: r.ByZone()}
	}
	var withEvidence []Candidate
	for _, c := range r.Candidates {
		if c.HasEvidence() {
			withEvidence = append(withEvidence, c)
		}
	}
	if len(withEvidence) == 0 {
		e := &StorageNetworkError{}
		if len(r.Candidates) > 0 {
			e.Guess = &r.Candidates[0]
		}
		return nil, e
	}
	// Candidates are sorted by score, best first: the tied ones are a prefix.
	tied := 1
	for tied < len(withEvidence) && withEvidence[tied].Score == withEvidence[0].Score {
		tied++
	}
	if tied > 1 {
		return nil, &StorageNetworkError{Tied: withEvidence[:tied]}
	}
	best := withEvidence[0]
	return &best, nil
}
