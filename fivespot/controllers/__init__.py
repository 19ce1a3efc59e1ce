"""fivespot's controllers: the capacity controller and the schedule providers, on a shared runtime."""
