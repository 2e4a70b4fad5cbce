"""Task registry: loaders, prompt builders, reward functions and default agents."""
