package testenv

import (
	"crypto/rand"
	"math/big"
)

// NameSuffix is five characters of the alphabet Kubernetes' generateName uses, for the names
// the simulated controllers give the Machines they create.
func NameSuffix() string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	for i := range b {
		n, _ := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		b[i] = alphabet[n.Int64()]
	}
	return string(b)
}
