"""After the launch: reading and following logs, why a job is pending, the
reports it wrote, whether a backend answers, and diagnosis."""
