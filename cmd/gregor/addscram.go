package main

// gregor storage format --add-scram, as kafka-storage parses it
// (ScramParser): MECHANISM=[name=...,password=...] or
// MECHANISM=[name=...,salt=<base64>,saltedpassword=<base64>], with an
// optional iterations (default 4096, 4096..16384) and an optional base64
// salt; values may be double-quoted. The credentials become
// UserScramCredentialRecords written with the bootstrap records, so that
// users exist before the first start (inter-broker SCRAM users).

import (
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gregorbroker/gregor/controller/decide"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/sasl"
)

func parseAddScram(arg string) (*metadata.UserScramCredentialRecord, error) {
	arg = strings.TrimSpace(arg)
	eq := strings.IndexByte(arg, '=')
	if eq < 0 {
		return nil, fmt.Errorf("Failed to find equals sign in SCRAM argument '%s'", arg)
	}
	mechName, config := arg[:eq], arg[eq+1:]
	mech, ok := sasl.ScramByName(mechName)
	if !ok {
		return nil, fmt.Errorf("The add-scram mechanism %s is not supported.", mechName)
	}
	if !strings.HasPrefix(config, "[") {
		return nil, errors.New("Expected configuration string to start with [")
	}
	if !strings.HasSuffix(config, "]") {
		return nil, errors.New("Expected configuration string to end with ]")
	}
	components := map[string]string{}
	for _, c := range strings.Split(config[1:len(config)-1], ",") {
		k, v, ok := strings.Cut(c, "=")
		if !ok {
			return nil, fmt.Errorf("No equals sign found in SCRAM component: %s", c)
		}
		if len(v) >= 2 && strings.HasPrefix(v, `"`) && strings.HasSuffix(v, `"`) {
			v = v[1 : len(v)-1]
		}
		components[k] = v
	}
	take := func(k string) (string, bool) {
		v, ok := components[k]
		delete(components, k)
		return v, ok
	}
	name, ok := take("name")
	if !ok {
		return nil, errors.New("You must supply 'name' to add-scram")
	}
	var salt []byte
	if s, ok := take("salt"); ok {
		var err error
		if salt, err = base64.StdEncoding.DecodeString(s); err != nil {
			return nil, fmt.Errorf("Failed to decode given salt: %s", s)
		}
	}
	iterations := 4096
	if s, ok := take("iterations"); ok {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("Failed to parse iterations count: %s", s)
		}
		iterations = int(n)
	}
	password, hasPassword := take("password")
	saltedText, hasSalted := take("saltedpassword")
	var salted []byte
	if !hasPassword {
		if !hasSalted {
			return nil, errors.New("You must supply one of 'password' or 'saltedpassword' to add-scram")
		}
		if salt == nil {
			return nil, errors.New("You must supply 'salt' with 'saltedpassword' to add-scram")
		}
		var err error
		if salted, err = base64.StdEncoding.DecodeString(saltedText); err != nil {
			return nil, fmt.Errorf("Failed to decode given saltedPassword: %s", saltedText)
		}
	}
	if len(components) > 0 {
		keys := make([]string, 0, len(components))
		for k := range components {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return nil, fmt.Errorf("Unknown SCRAM configurations: %s", strings.Join(keys, ", "))
	}
	if salt == nil {
		salt = sasl.RandomSalt()
	}
	if iterations < int(mech.MinIterations) {
		return nil, fmt.Errorf("The 'iterations' value must be >= %d for add-scram using %s", mech.MinIterations, mech.Name)
	}
	if iterations > int(mech.MaxIterations) {
		return nil, fmt.Errorf("The 'iterations' value must be <= %d for add-scram using %s", mech.MaxIterations, mech.Name)
	}
	if salted == nil {
		salted = mech.SaltedPassword(password, salt, iterations)
	}
	return decide.NewUserScramCredentialRecord(name, mech, salt, salted, int32(iterations)), nil
}
