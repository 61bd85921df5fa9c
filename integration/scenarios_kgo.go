package integration

func kgoScenarios() []Scenario { return nil }
