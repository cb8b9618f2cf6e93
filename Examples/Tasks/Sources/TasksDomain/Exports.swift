// An app imports TasksDomain alone: the event vocabulary and the task state it works with come along.
@_exported import TasksModel
