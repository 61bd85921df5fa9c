package integration

func clientScenarios() []Scenario { return nil }
